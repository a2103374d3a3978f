//! What the user points at and how the screen is shown: the settings
//! panel's cursor, the panel focused (what `?` explains), a chart's
//! readout, presentation mode, the pause, the terminal's size at the last
//! frame and what the frames cost. A click, Tab or Esc changes them
//! together through one method each (a click on a chart focuses its axes,
//! drops the cursor and reads the chart), so no caller leaves a cursor
//! and a readout both claiming the user's attention.

use ratatui::layout::Rect;

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

/// The cursor, the focus, a readout, and how the screen is shown.
#[derive(Debug, Clone, Default)]
pub struct View {
    /// The settings panel's cursor: the setting selected (Up/Down, a click);
    /// None until one is.
    cursor: Option<&'static str>,
    /// The panel last clicked, by its help topic (`header`, `stages`,
    /// `axes`...): `?` opens the help at it; Esc clears it.
    focus: Option<&'static str>,
    /// A chart clicked: its values at that time.
    readout: Option<Readout>,
    /// True while the workload is paused.
    paused: bool,
    /// Presentation mode: big numbers, high contrast, less chrome.
    present: bool,
    /// The terminal's size at the last frame (what the mouse and the
    /// cursor's rows are laid out on); empty before the first.
    screen: Rect,
    /// The UI's own cost.
    cost: UiCost,
}

impl View {
    /// The setting under the settings panel's cursor, if one is.
    pub fn cursor(&self) -> Option<&'static str> {
        self.cursor
    }

    /// The panel focused, by its help topic, if one is.
    pub fn focus(&self) -> Option<&'static str> {
        self.focus
    }

    /// A chart's readout, if one was clicked.
    pub fn readout(&self) -> Option<Readout> {
        self.readout
    }

    /// What `?` explains: the setting under the cursor (its whole name:
    /// the help's row for it), else the panel last clicked (a chart: its
    /// axes); None: the whole help.
    pub fn help_topic(&self) -> Option<String> {
        self.cursor.or(self.focus).map(str::to_string)
    }

    /// The cursor one row down (or up) among `rows`, the settings panel's
    /// rows as drawn (see [`move_cursor`]).
    pub fn step_cursor(&mut self, rows: &[&'static str], down: bool) {
        self.cursor = move_cursor(self.cursor, rows, down);
    }

    /// A click on the setting `key`: the cursor on it, no other focus and
    /// no readout.
    pub fn select_setting(&mut self, key: &'static str) {
        self.focus = None;
        self.readout = None;
        self.cursor = Some(key);
    }

    /// The focus to the settings panel (Tab): its cursor on the row it
    /// was on if `rows` (the rows drawn) still hold it, else the top one;
    /// no readout.
    pub fn focus_settings(&mut self, rows: &[&'static str]) {
        self.readout = None;
        self.cursor = self
            .cursor
            .filter(|c| rows.contains(c))
            .or(rows.first().copied());
        self.focus = None;
    }

    /// The focus to the panel `topic` (a click on it, Tab), or to none (a
    /// click on nothing): no cursor, no readout.
    pub fn focus_panel(&mut self, topic: Option<&'static str>) {
        self.readout = None;
        self.cursor = None;
        self.focus = topic;
    }

    /// A click on a chart: its values at that time, the focus on the
    /// charts' axes, no cursor.
    pub fn read_chart(&mut self, readout: Readout) {
        self.focus = Some("axes");
        self.cursor = None;
        self.readout = Some(readout);
    }

    /// Esc on the main screen: closes the chart readout, else the cursor,
    /// else the focus; false when there was none.
    pub fn escape(&mut self) -> bool {
        self.readout.take().is_some() || self.cursor.take().is_some() || self.focus.take().is_some()
    }

    /// True while the workload is paused.
    pub fn paused(&self) -> bool {
        self.paused
    }

    /// The workload was paused (or resumed).
    pub fn set_paused(&mut self, paused: bool) {
        self.paused = paused;
    }

    /// Presentation mode: big numbers, high contrast, less chrome.
    pub fn present(&self) -> bool {
        self.present
    }

    /// Presentation mode on or off.
    pub fn set_present(&mut self, present: bool) {
        self.present = present;
    }

    /// Presentation mode on if it was off, off if it was on.
    pub fn toggle_present(&mut self) {
        self.present = !self.present;
    }

    /// The terminal's size at the last frame; empty before the first.
    pub fn screen(&self) -> Rect {
        self.screen
    }

    /// A frame is drawn on a terminal of this size.
    pub fn set_screen(&mut self, screen: Rect) {
        self.screen = screen;
    }

    /// The UI's own cost.
    pub fn cost(&self) -> &UiCost {
        &self.cost
    }

    /// The frame rate asked for (`--fps`).
    pub fn set_fps(&mut self, fps: f64) {
        self.cost.fps = fps;
    }

    /// The UI thread's CPU % over the last second, and the mean time to
    /// draw a frame (ms).
    pub fn measured(&mut self, cpu_pct: f64, frame_ms: f64) {
        self.cost.cpu_pct = cpu_pct;
        self.cost.frame_ms = frame_ms;
    }
}

/// The cursor one row down (or up) among `rows`, stopping at the ends; from
/// no cursor, Down starts at the top and Up at the bottom; a cursor on a
/// setting no longer shown starts over the same way.
pub fn move_cursor(
    cursor: Option<&'static str>,
    rows: &[&'static str],
    down: bool,
) -> Option<&'static str> {
    let at = cursor.and_then(|c| rows.iter().position(|r| *r == c));
    let i = match (at, down) {
        (None, true) => 0,
        (None, false) => rows.len().checked_sub(1)?,
        (Some(i), true) => (i + 1).min(rows.len() - 1),
        (Some(i), false) => i.saturating_sub(1),
    };
    rows.get(i).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cursor_moves_over_the_rows_and_stops_at_the_ends() {
        let rows = ["a", "b", "c"];
        assert_eq!(move_cursor(None, &rows, true), Some("a"));
        assert_eq!(move_cursor(None, &rows, false), Some("c"));
        assert_eq!(move_cursor(Some("a"), &rows, true), Some("b"));
        assert_eq!(move_cursor(Some("a"), &rows, false), Some("a"));
        assert_eq!(move_cursor(Some("c"), &rows, true), Some("c"));
        assert_eq!(move_cursor(Some("gone"), &rows, true), Some("a"));
        assert_eq!(move_cursor(None, &[], true), None);
    }

    /// Esc lets go of the readout, then the cursor, then the focus.
    #[test]
    fn escape_lets_go_of_one_thing_at_a_time() {
        let mut v = View::default();
        v.focus_panel(Some("stages"));
        v.select_setting("workers.mode");
        assert_eq!(v.focus(), None, "selecting a setting moves the focus");
        v.read_chart(Readout {
            chart: ChartKind::Latency,
            t_s: 1.0,
        });
        assert_eq!((v.cursor(), v.focus()), (None, Some("axes")));
        assert!(v.escape());
        assert_eq!(v.readout(), None);
        assert_eq!(v.focus(), Some("axes"));
        assert!(v.escape());
        assert!(!v.escape());
    }
}
