//! The `?` screen drawn: [`crate::tui::help`]'s rows (keys, knobs,
//! glossary, recipes) wrapped beside their key column in a popup, from the
//! line scrolled to, its title saying where in the help it is and what it
//! is narrowed to.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Widget};

use super::look::{panel_fit, popup};
use crate::tui::help;
use crate::tui::theme::Theme;

/// The help's lines for a popup `width` wide inside: each row's text
/// wrapped at spaces beside its key column.
pub fn lines(mode: help::Mode, find: &str, width: usize, th: &Theme) -> Vec<Line<'static>> {
    use help::KEY_W;
    let mut out = Vec::new();
    for (k, what) in help::rows(mode, find) {
        for (key, part) in help::row_lines(&k, what, width) {
            if key.is_empty() && part.is_empty() {
                out.push(Line::from(""));
                continue;
            }
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
    // The longest title that fits whole (a long search shortens the
    // instructions first, never the search).
    let n = match all.len() {
        1 => "1 line".to_string(),
        n => format!("{n} lines"),
    };
    let titles: Vec<String> = match (typing, find.is_empty()) {
        (true, _) => vec![
            format!("help: find {find}_ (Enter keeps it, Esc clears)"),
            format!("help: find {find}_ (Enter, Esc)"),
            format!("find {find}_"),
        ],
        (false, false) => vec![
            format!("help: \"{find}\", {n} (/ finds again, Esc: all of it, ? closes)"),
            format!("help: \"{find}\", {n} (Esc: all, ? closes)"),
            format!("help: \"{find}\" (? closes)"),
            format!("\"{find}\""),
        ],
        (false, true) => {
            let at = format!(
                "help {}-{} of {}",
                top + 1,
                (top + inner_h).min(all.len()),
                all.len()
            );
            vec![
                format!("{at}: ↑↓ PgUp PgDn scroll, / finds, Esc closes"),
                format!("{at}: ↑↓ scroll, / finds, Esc closes"),
                at,
            ]
        }
    };
    Paragraph::new(shown)
        .block(panel_fit(&titles, r.width, th))
        .render(r, buf);
}
