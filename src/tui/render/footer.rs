//! The footer: the keys, most used first, as many as fit, from the one key
//! table.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;

use crate::tui::app::App;
use crate::tui::keys::{self, Footer};
use crate::tui::theme::Theme;

pub(crate) fn render_footer(app: &App, th: &Theme, area: Rect, buf: &mut Buffer) {
    // Keys that always show, at the right end: "  ? help  q quit".
    let always: Vec<(String, &str)> = keys::bindings()
        .iter()
        .filter_map(|b| match b.footer {
            Footer::Always(what) => Some((b.shown().next()?.glyph(), what)),
            _ => None,
        })
        .collect();
    let mut tail = Vec::new();
    for (i, (k, what)) in always.iter().enumerate() {
        let lead = if i == 0 { "  " } else { " " };
        let gap = if i + 1 < always.len() { " " } else { "" };
        tail.push((format!("{lead}{k} "), th.title()));
        tail.push((format!("{what}{gap}"), th.dim()));
    }
    let tail_w: usize = tail.iter().map(|(t, _)| t.chars().count()).sum();
    // A demo's step and countdown lead its caption.
    let progress = app.show.progress(app.window.elapsed_s());
    let caption = match (progress, app.show.caption()) {
        (Some(p), Some(c)) => Some(format!("{p} ▶ {c}")),
        (Some(p), None) => Some(p),
        (None, Some(c)) => Some(format!("▶ {c}")),
        (None, None) => None,
    };
    // A message or caption stops short of the keys on the right; where it
    // does not fit, whole items or words and where it is whole (the
    // events panel logs both).
    let room = (area.width as usize).saturating_sub(tail_w + 2);
    let fit = |t: &str| crate::tui::text::fit_message(t, room, "in events");
    if let Some(c) = caption.filter(|_| app.flash_text().is_none()) {
        Line::from(Span::styled(
            format!(" {}", fit(&c)),
            Style::default().fg(th.title).add_modifier(Modifier::BOLD),
        ))
        .render(area, buf);
    } else if let Some(msg) = app.flash_text() {
        let line = Line::from(vec![
            Span::styled(" ", th.text()),
            Span::styled(fit(msg), Style::default().fg(th.warn)),
        ]);
        line.render(area, buf);
    } else {
        // The others, in table order, as many as fit; then the ways in
        // (cursor, Enter, `:`) while room is left.
        let budget = (area.width as usize).saturating_sub(tail_w);
        let mut spans = Vec::new();
        let mut used = 0;
        let mode = app.running.mode();
        for last in [false, true] {
            for b in keys::bindings() {
                let what = match b.footer {
                    Footer::IfRoom(what) if !last => what,
                    Footer::Last(what) if last => what,
                    _ => continue,
                };
                // A key that does nothing here is not offered: a setting
                // inert on this path or target, or one this mode refuses.
                if b.setting.is_some_and(|k| app.running.inert(k)) || !b.works_in(mode) {
                    continue;
                }
                let k = b.compact();
                let n = k.chars().count() + what.chars().count() + 3;
                if used + n > budget {
                    break;
                }
                used += n;
                spans.push(Span::styled(format!(" {k}"), th.title()));
                spans.push(Span::styled(format!(" {what} "), th.dim()));
            }
        }
        Line::from(spans).render(area, buf);
    }
    let mut x = area.x + area.width.saturating_sub(tail_w as u16);
    for (text, style) in tail {
        buf.set_string(x, area.y, &text, style);
        x += text.chars().count() as u16;
    }
}
