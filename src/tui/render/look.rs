//! How the explorer draws: its [`Look`] (theme, ASCII or not) and the small
//! pieces every panel and popup shares (a titled panel, a check mark, a chart
//! legend, a centred popup, the ASCII fallback). Shaping text to a width
//! (wrapping, cutting) draws nothing and is [`crate::tui::text`]'s.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::symbols::Marker as Dots;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Widget};

use super::chart::fmt_secs;
use crate::metrics::IntervalRecord;
use crate::tui::app::App;
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

/// A panel titled by the first of `titles` (longest first) that fits
/// `width` columns whole; the last where none does.
pub(crate) fn panel_fit<'a, S: AsRef<str>>(titles: &'a [S], width: u16, th: &Theme) -> Block<'a> {
    let t = crate::tui::text::first_fitting(titles, width.saturating_sub(4) as usize);
    panel(t, th)
}

/// Marks the focused panel at `r` (Tab, a click): its border in the
/// title's colour, bold (only the border's own lines and corners, so a
/// chart's legend on it keeps its colours; `--ascii` replaces them after,
/// keeping the style); the header, a line without a border, underlined.
pub(crate) fn focus_frame(r: Rect, th: &Theme, buf: &mut Buffer) {
    let style = Style::default()
        .fg(th.title)
        .add_modifier(ratatui::style::Modifier::BOLD);
    if r.height < 2 {
        buf.set_style(
            r,
            Style::default().add_modifier(ratatui::style::Modifier::UNDERLINED),
        );
        return;
    }
    let (x1, y1) = (r.x + r.width - 1, r.y + r.height - 1);
    for y in r.y..=y1 {
        for x in r.x..=x1 {
            if !(y == r.y || y == y1 || x == r.x || x == x1) {
                continue;
            }
            if let Some(c) = buf.cell_mut((x, y))
                && matches!(
                    c.symbol(),
                    "─" | "│" | "┌" | "┐" | "└" | "┘" | "├" | "┤" | "┬" | "┴"
                )
            {
                c.set_style(style);
            }
        }
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
    app.window.history().iter().rev().find(|r| !r.paused)
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

/// The ASCII look-alike of a character the screen draws (`--ascii`);
/// None for one without (drawn `?`).
pub fn ascii_for(c: char) -> Option<&'static str> {
    Some(match c {
        '─' | '━' | '┄' | '—' | '–' => "-",
        '│' | '┃' | '┆' => "|",
        '┌' | '┐' | '└' | '┘' | '├' | '┤' | '┬' | '┴' | '┼' | '╭' | '╮' | '╰' | '╯' => {
            "+"
        }
        '█' => "#",
        '▒' => ":",
        '▄' => "=",
        '▁' => "_",
        '✓' => "+",
        '✗' => "-",
        '…' => "~",
        '·' => ".",
        '◆' => "*",
        '▶' => ">",
        '⏸' => "=",
        '→' | '⇥' => ">",
        '←' | '⇤' => "<",
        '≤' => "<",
        '≥' => ">",
        '↑' => "^",
        '↓' => "v",
        '␣' => "_",
        '×' => "x",
        'µ' => "u",
        '\u{2800}'..='\u{28ff}' => "*",
        _ => return None,
    })
}

/// Replaces every non-ASCII symbol in `area` with an ASCII look-alike
/// ([`ascii_for`]), for terminals without Braille or box drawing
/// (`--ascii`).
pub fn asciify(buf: &mut Buffer, area: Rect) {
    for y in area.y..area.y + area.height {
        for x in area.x..area.x + area.width {
            let cell = &mut buf[(x, y)];
            let sym = cell.symbol();
            if sym.is_ascii() {
                continue;
            }
            let c = sym.chars().next().unwrap_or(' ');
            cell.set_symbol(ascii_for(c).unwrap_or("?"));
        }
    }
}
