//! The events panel's log and the footer's flash: lines of events and
//! notices, the newest last, at most `LOG_LINES` kept, each numbered
//! from the first ever logged (so a panel scrolled back stays on its lines
//! while new ones come, and never past what is kept); and the one-line
//! message the footer shows for a few seconds, one too long for it going
//! to the log as well, so the whole text is always on screen somewhere.
//! The clock is the caller's: the run's elapsed seconds, passed in.

use std::collections::VecDeque;

/// Lines of the event and notice log kept.
const LOG_LINES: usize = 200;

/// The longest flash message an 80-column footer shows whole (beside its
/// `? help  q quit`).
const FLASH_WHOLE: usize = 62;

/// Seconds a flash message shows.
const FLASH_S: f64 = 4.0;

/// The first-contact hint (a live explorer without a demo): three keys.
pub const FIRST_HINT: &str = "try w: move the workers · b: baseline · ?: help (a key hides)";

/// One line of the log: when (seconds of the run), its text, and whether
/// it is a notice (drawn as one) rather than an event.
pub type LogLine = (f64, String, bool);

/// The events and notices, the events panel's scroll, the flash.
#[derive(Debug, Clone, Default)]
pub struct Log {
    /// Events and notices, newest last, with their time.
    lines: VecDeque<LogLine>,
    /// Lines dropped from the front of `lines` (its first line's number).
    dropped: u64,
    /// The events panel scrolled back: the number (counted from the first
    /// line ever logged) of the newest line shown; None follows the newest.
    anchor: Option<u64>,
    /// A one-line message and until when (elapsed seconds) it shows.
    flash: Option<(String, f64)>,
}

impl Log {
    /// Adds a line to the events log.
    pub fn line(&mut self, t_s: f64, text: String, notice: bool) {
        self.lines.push_back((t_s, text, notice));
        while self.lines.len() > LOG_LINES {
            self.lines.pop_front();
            self.dropped += 1;
        }
        // Scrolled back past what is kept: show the oldest line kept.
        if let Some(a) = self.anchor.as_mut() {
            *a = (*a).max(self.dropped);
        }
    }

    /// The lines kept, oldest first.
    pub fn lines(&self) -> &VecDeque<LogLine> {
        &self.lines
    }

    /// The number of the oldest line kept (the lines dropped before it).
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// The number of the newest line of the log (0 when empty).
    pub fn newest(&self) -> u64 {
        (self.dropped + self.lines.len() as u64).saturating_sub(1)
    }

    /// The events panel scrolled back: the number of the newest line
    /// shown; None when it follows the newest.
    pub fn anchor(&self) -> Option<u64> {
        self.anchor
    }

    /// The log lines the events panel shows at its bottom: up to the
    /// anchor when scrolled back, else all. (number, line)
    pub fn shown(&self) -> impl Iterator<Item = (u64, &LogLine)> {
        let upto = self.anchor.unwrap_or(u64::MAX);
        let first = self.dropped;
        self.lines
            .iter()
            .enumerate()
            .map(move |(i, l)| (first + i as u64, l))
            .take_while(move |(n, _)| *n <= upto)
    }

    /// Scrolls the events panel back (`up`) or forward by `lines` log
    /// lines, never back past `oldest` (the line above which the panel
    /// would not be full: see [`crate::tui::render::layout::events_oldest`]);
    /// forward to the newest follows new lines again.
    pub fn scroll(&mut self, up: bool, lines: u64, oldest: u64) {
        let newest = self.newest();
        let at = self.anchor.unwrap_or(newest);
        let to = if up {
            at.saturating_sub(lines).max(oldest.min(at))
        } else {
            at + lines
        };
        self.anchor = (to < newest).then_some(to);
    }

    /// Shows a one-line message at `now` for a few seconds. One longer
    /// than an 80-column footer can show whole also goes to the event
    /// log, so the whole text is always on screen somewhere.
    pub fn flash(&mut self, text: String, now: f64) {
        if text.chars().count() > FLASH_WHOLE {
            self.line(now, text.clone(), false);
        }
        self.flash = Some((text, now + FLASH_S));
    }

    /// Shows a message whose content the events panel already holds (a
    /// change of settings: each changed key is a marker's line there), so
    /// it is not logged a second time however long it is.
    pub fn flash_logged(&mut self, text: String, now: f64) {
        self.flash = Some((text, now + FLASH_S));
    }

    /// Shows a message and logs it whatever its length: an event worth
    /// finding later (an A/B's stop).
    pub fn announce(&mut self, text: String, now: f64) {
        self.line(now, text.clone(), false);
        self.flash_logged(text, now);
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

    /// The flash message still due at `now`, if any.
    pub fn flash_text(&self, now: f64) -> Option<&str> {
        self.flash
            .as_ref()
            .filter(|(_, until)| *until >= now)
            .map(|(t, _)| t.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A long flash is logged too; a short one, or one already logged, is
    /// not; each shows for a few seconds.
    #[test]
    fn a_flash_too_long_for_the_footer_is_logged_too() {
        let mut l = Log::default();
        l.flash("short".into(), 1.0);
        assert!(l.lines().is_empty());
        assert_eq!(l.flash_text(5.0), Some("short"));
        assert_eq!(l.flash_text(5.1), None);
        let long = "x".repeat(FLASH_WHOLE + 1);
        l.flash(long.clone(), 2.0);
        assert_eq!(l.lines().len(), 1);
        l.flash_logged(long, 2.0);
        assert_eq!(l.lines().len(), 1);
        l.announce("A/B stopped".into(), 3.0);
        assert_eq!(l.lines().len(), 2);
    }

    /// Scrolled back, the panel stays on its lines as new ones come, and
    /// never past the oldest kept.
    #[test]
    fn the_anchor_stays_and_never_passes_what_is_kept() {
        let mut l = Log::default();
        for i in 0..10 {
            l.line(i as f64, format!("{i}"), false);
        }
        l.scroll(true, 3, 0);
        assert_eq!(l.anchor(), Some(6));
        l.line(11.0, "later".into(), false);
        assert_eq!(l.anchor(), Some(6));
        for i in 0..LOG_LINES {
            l.line(12.0, format!("more {i}"), false);
        }
        assert_eq!(l.anchor(), Some(l.dropped()));
        l.scroll(false, 1000, 0);
        assert_eq!(l.anchor(), None);
    }
}
