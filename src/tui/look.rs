//! How the explorer draws: its [`Look`] (theme, ASCII or not) and the small
//! pieces every panel and popup shares (a titled panel, a check mark, a chart
//! legend, a centred popup, the ASCII fallback). Outside `render/` so the help
//! and presentation screens can use it without a cycle.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::symbols::Marker as Dots;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Widget};

use crate::metrics::IntervalRecord;
use crate::tui::app::App;
use crate::tui::chart::fmt_secs;
use crate::tui::theme::Theme;

/// How to draw: colours and which characters the terminal can show.
#[derive(Debug, Clone, Copy)]
pub struct Look {
    /// Colours.
    pub theme: Theme,
    /// Only ASCII characters (no Braille, no box drawing).
    pub ascii: bool,
}

impl Look {
    pub(crate) fn dots(&self) -> Dots {
        if self.ascii {
            Dots::Custom('*')
        } else {
            Dots::Braille
        }
    }
}

pub(crate) fn mark(ok: bool, th: &Theme) -> Span<'static> {
    if ok {
        Span::styled("✓", Style::default().fg(th.good))
    } else {
        Span::styled("✗", Style::default().fg(th.bad))
    }
}

pub(crate) fn panel<'a>(title: &'a str, th: &Theme) -> Block<'a> {
    Block::default()
        .borders(Borders::ALL)
        .border_style(th.border())
        .title(Span::styled(format!(" {title} "), th.title()))
}

pub(crate) fn fmt_t(t: f64) -> String {
    if t < 60.0 {
        format!("{t:.1}s")
    } else {
        fmt_secs(t)
    }
}

pub(crate) fn legend<'a>(
    title: &'a str,
    items: Vec<(String, ratatui::style::Color)>,
    th: &Theme,
) -> Line<'a> {
    let mut spans = vec![Span::styled(format!(" {title} "), th.title())];
    for (text, color) in items {
        spans.push(Span::styled(
            format!("━ {text}  "),
            Style::default().fg(color),
        ));
    }
    Line::from(spans)
}

pub(crate) fn latest(app: &App) -> Option<&IntervalRecord> {
    app.history.iter().rev().find(|r| !r.paused)
}

/// A `w` x `h` rectangle centred in `area` (clipped to it), cleared: the
/// ground of a popup.
pub fn popup(area: Rect, w: u16, h: u16, buf: &mut Buffer) -> Rect {
    let (w, h) = (w.min(area.width), h.min(area.height));
    let r = Rect {
        x: area.x + (area.width - w) / 2,
        y: area.y + (area.height - h) / 2,
        width: w,
        height: h,
    };
    Clear.render(r, buf);
    r
}

/// Replaces every non-ASCII symbol in `area` with an ASCII look-alike, for
/// terminals without Braille or box drawing (`--ascii`).
pub fn asciify(buf: &mut Buffer, area: Rect) {
    for y in area.y..area.y + area.height {
        for x in area.x..area.x + area.width {
            let cell = &mut buf[(x, y)];
            let sym = cell.symbol();
            if sym.is_ascii() {
                continue;
            }
            let c = sym.chars().next().unwrap_or(' ');
            let r = match c {
                '─' | '━' | '┄' => "-",
                '│' | '┃' => "|",
                '┌' | '┐' | '└' | '┘' | '├' | '┤' | '┬' | '┴' | '┼' | '╭' | '╮' | '╰' | '╯' => {
                    "+"
                }
                '█' => "#",
                '▒' => ":",
                '✓' => "+",
                '✗' => "-",
                '…' => "~",
                '▶' => ">",
                '⏸' => "=",
                '→' => ">",
                '≤' => "<",
                '↑' => "^",
                '↓' => "v",
                '␣' => "_",
                '\u{2800}'..='\u{28ff}' => "*",
                _ => "?",
            };
            cell.set_symbol(r);
        }
    }
}

/// `text` in lines of at most `first` characters (the first line) and
/// `rest` (the others), broken at spaces; a word longer than a line is
/// broken where it must be. Never cuts a word that fits on a line.
pub fn wrap_words(text: &str, first: usize, rest: usize) -> Vec<String> {
    let (first, rest) = (first.max(1), rest.max(1));
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    let mut width = first;
    let mut len = 0;
    for word in text.split(' ').filter(|w| !w.is_empty()) {
        let mut word: Vec<char> = word.chars().collect();
        let sep = usize::from(len > 0);
        if len + sep + word.len() > width && len > 0 {
            lines.push(std::mem::take(&mut line));
            len = 0;
            width = rest;
        } else if sep == 1 {
            line.push(' ');
            len += 1;
        }
        // A word longer than a whole line: broken at the line's end.
        while word.len() > width - len {
            let take = width - len;
            line.extend(word.drain(..take));
            lines.push(std::mem::take(&mut line));
            len = 0;
            width = rest;
        }
        len += word.len();
        line.extend(word);
    }
    if !line.is_empty() || lines.is_empty() {
        lines.push(line);
    }
    lines
}

/// `text` cut to `width` characters with an ellipsis where it had to be
/// cut (at a space when one is near the end).
pub fn ellipsize(text: &str, width: usize) -> String {
    let n = text.chars().count();
    if n <= width {
        return text.to_string();
    }
    if width == 0 {
        return String::new();
    }
    let keep: String = text.chars().take(width - 1).collect();
    // Back to the last space when that loses at most a third of the room.
    let cut = match keep.rfind(' ') {
        Some(i) if keep[..i].chars().count() >= (width - 1) * 2 / 3 => keep[..i].trim_end(),
        _ => keep.as_str(),
    };
    format!("{cut}…")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_wrap_at_spaces_and_long_words_break() {
        assert_eq!(
            wrap_words("workers.mode: bound -> unbound", 20, 18),
            ["workers.mode: bound", "-> unbound"]
        );
        assert_eq!(wrap_words("", 10, 10), [""]);
        assert_eq!(wrap_words("abcdefghij", 4, 3), ["abcd", "efg", "hij"]);
        assert_eq!(wrap_words("a bcdefgh", 4, 4), ["a", "bcde", "fgh"]);
        for l in wrap_words("the quick brown fox jumps over the lazy dog", 12, 10) {
            assert!(l.chars().count() <= 12, "{l}");
            assert!(!l.starts_with(' ') && !l.ends_with(' '), "{l:?}");
        }
    }

    #[test]
    fn a_cut_says_so_with_an_ellipsis() {
        assert_eq!(ellipsize("short", 10), "short");
        assert_eq!(ellipsize("queue_depth", 10), "queue_dep…");
        assert_eq!(
            ellipsize("q again quits; the baseline goes", 20),
            "q again quits; the…"
        );
        assert_eq!(ellipsize("abc", 0), "");
        assert_eq!(ellipsize("abcdef", 1), "…");
    }
}
