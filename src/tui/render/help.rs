//! The `?` screen drawn: [`crate::tui::help`]'s rows (keys, knobs,
//! glossary, recipes) wrapped beside their key column in a popup, from the
//! line scrolled to, its title saying where in the help it is and what it
//! is narrowed to.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Widget};

use super::look::{panel, popup};
use crate::tui::help;
use crate::tui::text::wrap_words;
use crate::tui::theme::Theme;

/// The help's lines for a popup `width` wide inside: each row's text
/// wrapped at spaces beside its key column.
pub fn lines(mode: help::Mode, find: &str, width: usize, th: &Theme) -> Vec<Line<'static>> {
    const KEY_W: usize = 15;
    let text_w = width.saturating_sub(KEY_W + 2).max(10);
    let mut out = Vec::new();
    for (k, what) in help::rows(mode, find) {
        if k.is_empty() {
            out.push(Line::from(""));
            continue;
        }
        for (i, part) in wrap_words(what, text_w, text_w).into_iter().enumerate() {
            let key = if i == 0 { k.clone() } else { String::new() };
            out.push(Line::from(vec![
                Span::styled(format!("{key:>KEY_W$}  "), th.title()),
                Span::styled(part, th.text()),
            ]));
        }
    }
    out
}

/// Draws the help over `area`, from line `scroll`, with its search.
pub fn render(
    area: Rect,
    buf: &mut Buffer,
    th: &Theme,
    mode: help::Mode,
    scroll: usize,
    find: &str,
    typing: bool,
) {
    let r = popup(
        area,
        area.width.saturating_sub(4).min(110),
        area.height.saturating_sub(2),
        buf,
    );
    let inner_w = r.width.saturating_sub(2) as usize;
    let inner_h = r.height.saturating_sub(2) as usize;
    let all = lines(mode, find, inner_w, th);
    let top = scroll.min(all.len().saturating_sub(inner_h));
    let shown: Vec<Line> = all.iter().skip(top).take(inner_h).cloned().collect();
    let title = match (typing, find.is_empty()) {
        (true, _) => format!("help: find {find}_ (Enter keeps it, Esc clears)"),
        (false, false) => format!(
            "help: \"{find}\", {} lines (/ finds again, Esc: all of it, ? closes)",
            all.len()
        ),
        (false, true) => format!(
            "help {}-{} of {}: ↑↓ PgUp PgDn scroll, / finds, Esc closes",
            top + 1,
            (top + inner_h).min(all.len()),
            all.len()
        ),
    };
    Paragraph::new(shown)
        .block(panel(&title, th))
        .render(r, buf);
}
