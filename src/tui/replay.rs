//! Replaying a recording in the explorer: the recorded intervals are fed to
//! the same [`App`] on a clock that runs at `--speed` and can be paused and
//! moved, so charts, markers and the baseline behave as they did live, with
//! no workload running. Settings keys, the value chooser and the `:` prompt
//! are refused with the reason (the settings are as recorded); the settings
//! panel follows the recorded changes. The mouse works as live (a chart
//! click reads its values) except that a settings row only selects.

use std::time::Instant;

use ratatui::crossterm::event::{KeyCode, KeyEvent, MouseEvent};

use super::Driver;
use super::app::App;
use super::keys::Action;
use super::mouse::{self, REPLAY_REFUSAL};
use super::overlay::{self, OverlayAction};
use super::policy::action_for_key;
use super::state::Overlay;
use crate::output::recording::Recording;

pub use super::keys::{SEEK_HELP, SEEK_S};

/// Feeds a recording to the explorer.
pub struct ReplayDriver {
    rec: Recording,
    /// Records already pushed.
    next: usize,
    /// Position in the recording, seconds.
    pub clock_s: f64,
    /// Recording seconds per wall second.
    pub speed: f64,
    /// True while the clock stands.
    pub paused: bool,
    last: Instant,
    cpus: usize,
}

impl ReplayDriver {
    /// A replay from the start.
    pub fn new(rec: Recording, speed: f64) -> ReplayDriver {
        let cpus = rec.header.machine.cpus.max(1);
        ReplayDriver {
            rec,
            next: 0,
            clock_s: 0.0,
            speed,
            paused: false,
            last: Instant::now(),
            cpus,
        }
    }

    /// The explorer's state at the start of the recording.
    pub fn fresh_app(&self) -> App {
        let h = &self.rec.header;
        let mut app = App::new(
            h.settings.clone(),
            h.effective_settings.clone(),
            h.features.clone(),
            self.cpus,
        );
        app.running.set_replay(self.label());
        if let Some(d) = &h.demo {
            app.show.set_headline(d.headline());
        }
        if let Some(p) = &h.preset {
            app.show.apply_preset(p, "");
        }
        app
    }

    fn label(&self) -> String {
        format!("replay {}x", self.speed)
    }

    /// Length of the recording, seconds.
    pub fn length_s(&self) -> f64 {
        self.rec.records.last().map_or(0.0, |r| r.t_s)
    }

    /// Pushes every record up to the clock into `app`.
    pub fn feed(&mut self, app: &mut App) -> bool {
        let mut any = false;
        while let Some(r) = self.rec.records.get(self.next) {
            if r.t_s > self.clock_s {
                break;
            }
            for e in &r.events {
                if e.label == "baseline" {
                    // `b` was pressed during this interval: the window
                    // before it is the baseline, as it was live (a `b`
                    // refused live left no event).
                    let _ = app.mark_baseline();
                } else if let Some((key, change)) = e.label.split_once(": ")
                    && let Some((_, to)) = change.split_once(" -> ")
                {
                    // Follow the recorded change in the settings panel.
                    app.running.follow(key, to);
                }
            }
            app.push(r.clone());
            self.next += 1;
            any = true;
        }
        if self.next == self.rec.records.len()
            && !self.rec.records.is_empty()
            && !self.paused
            && self.clock_s >= self.length_s()
        {
            self.paused = true;
            app.view.set_paused(true);
            app.flash("end of the recording: Home replays it, arrows move, q quits");
        }
        any
    }

    /// Moves to `t_s` (clamped to the recording), rebuilding the explorer's
    /// state from the start so markers and the baseline are as they were.
    pub fn seek(&mut self, app: &mut App, t_s: f64) {
        let keep_window = app.window.length_s();
        *app = self.fresh_app();
        app.window.zoom_to(keep_window);
        self.next = 0;
        self.clock_s = t_s.clamp(0.0, self.length_s());
        let was_paused = self.paused;
        self.paused = false;
        self.feed(app);
        // At the end the replay stands still; elsewhere it keeps its state.
        self.paused = was_paused || self.next == self.rec.records.len();
        app.view.set_paused(self.paused);
        self.last = Instant::now();
    }
}

impl Driver for ReplayDriver {
    fn poll(&mut self, app: &mut App) -> bool {
        let now = Instant::now();
        if !self.paused {
            self.clock_s += now.duration_since(self.last).as_secs_f64() * self.speed;
        }
        self.last = now;
        if self.paused {
            return false;
        }
        self.feed(app)
    }

    fn key(&mut self, app: &mut App, key: KeyEvent) {
        if matches!(app.overlays.current(), Overlay::Help { .. }) {
            // The help scrolls and searches as in the live explorer.
            let nothing = |_: &str| false;
            if overlay::overlay_key(app.overlays.current_mut(), key, &nothing)
                == OverlayAction::Quit
            {
                app.quit();
            }
            return;
        }
        if app.overlays.is_open() {
            app.overlays.close();
            return;
        }
        match key.code {
            // With the timeline open the arrows choose its items.
            KeyCode::Left if !app.lanes.is_open() => return self.seek(app, self.clock_s - SEEK_S),
            KeyCode::Right if !app.lanes.is_open() => {
                return self.seek(app, self.clock_s + SEEK_S);
            }
            KeyCode::Home => {
                self.paused = false;
                return self.seek(app, 0.0);
            }
            _ => {}
        }
        let action = action_for_key(key, app.running.settings(), self.cpus);
        if mouse::panel_action(app, &action, false) {
            return;
        }
        if app.timeline_key(&action) {
            return;
        }
        match action {
            Action::Quit | Action::QuitNow => app.quit(),
            Action::ToggleTimeline => {
                if app.lanes.toggle() {
                    app.flash(
                        "timeline: the recording's spans (recorded while the explorer's timeline was open, or with a trace)",
                    );
                }
            }
            Action::ChooseItem(_) => {}
            Action::ToggleTrace => app
                .flash("T traces a live run; a replay's spans are the recording's (t shows them)"),
            Action::Escape => {
                if !app.view.escape() {
                    app.flash("Esc closes popups; q quits")
                }
            }
            Action::CursorUp
            | Action::CursorDown
            | Action::FocusNext
            | Action::FocusPrev
            | Action::OpenChooser
            | Action::OpenPrompt => {}
            Action::Suspend => {} // the terminal loop suspends
            Action::ToggleHelp => app.overlays.open(Overlay::help_on(app.view.help_topic())),
            Action::TogglePresent => app.view.toggle_present(),
            Action::ZoomIn => app.window.zoom(false),
            Action::ZoomOut => app.window.zoom(true),
            Action::ResetCharts => app.reset_charts(),
            Action::DropCache => app.flash("a replay has no page cache to drop"),
            Action::Reconnect => app.flash("a replay has no connection"),
            Action::TogglePause => {
                self.paused = !self.paused;
                app.view.set_paused(self.paused);
                self.last = Instant::now();
            }
            Action::MarkBaseline => match app.mark_baseline() {
                Ok(()) => app.flash("baseline marked"),
                Err(why) => app.flash(why.to_string()),
            },
            a if a.needs_workload() => app.flash(REPLAY_REFUSAL),
            Action::Apply(_)
            | Action::Refuse(_)
            | Action::OpenPicker
            | Action::StartSave
            | Action::FlipBaseline
            | Action::ToggleAb => unreachable!("needs_workload covers it"),
            Action::None => {}
        }
    }

    fn mouse(&mut self, app: &mut App, ev: MouseEvent) {
        match mouse::mouse(app, ev, false) {
            OverlayAction::Quit => app.quit(),
            OverlayAction::None => {}
            // Nothing opens a chooser in a replay; refuse all the same.
            _ => app.flash(REPLAY_REFUSAL),
        }
    }
}
