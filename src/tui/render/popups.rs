//! The popups over the main screen: an error, the save prompt, the preset
//! picker.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Widget, Wrap};

use crate::tui::look::*;
use crate::tui::theme::Theme;

pub(crate) fn error_popup(text: &str, area: Rect, buf: &mut Buffer, th: &Theme) {
    let w = (text.chars().count() as u16 + 4).clamp(30, area.width.saturating_sub(4));
    let r = popup(area, w, 5, buf);
    Paragraph::new(vec![
        Line::from(Span::styled(text.to_string(), Style::default().fg(th.bad))),
        Line::from(Span::styled("press any key", th.dim())),
    ])
    .wrap(Wrap { trim: true })
    .block(
        Block::default()
            .borders(Borders::ALL)
            .border_style(Style::default().fg(th.bad))
            .title(Span::styled(" refused ", Style::default().fg(th.bad))),
    )
    .render(r, buf);
}

pub(crate) fn prompt(title: &str, lines: Vec<Line>, area: Rect, buf: &mut Buffer, th: &Theme) {
    let w = area.width.saturating_sub(4).min(90);
    // Rows the wrapped lines take inside the borders.
    let inner = usize::from(w.saturating_sub(2)).max(1);
    let rows: usize = lines.iter().map(|l| l.width().div_ceil(inner).max(1)).sum();
    let r = popup(area, w, rows as u16 + 2, buf);
    Paragraph::new(lines)
        .wrap(Wrap { trim: true })
        .block(
            Block::default()
                .borders(Borders::ALL)
                .border_style(th.border())
                .title(Span::styled(title.to_string(), th.title())),
        )
        .render(r, buf);
}

pub(crate) fn picker(
    items: &[crate::tui::app::PickItem],
    selected: usize,
    area: Rect,
    buf: &mut Buffer,
    th: &Theme,
) {
    let w = area.width.saturating_sub(4).min(110);
    let h = (items.len() as u16 + 8).min(area.height.saturating_sub(2));
    let r = popup(area, w, h, buf);
    let block = panel(
        "presets: ↑↓ choose, Enter applies, any other key closes",
        th,
    );
    let inner = block.inner(r);
    block.render(r, buf);
    let list_h = (items.len() as u16).min(inner.height.saturating_sub(3));
    let first = selected.saturating_sub(list_h.saturating_sub(1) as usize);
    for (row, (i, item)) in items
        .iter()
        .enumerate()
        .skip(first)
        .take(list_h as usize)
        .enumerate()
    {
        let style = if i == selected {
            th.title().add_modifier(Modifier::REVERSED)
        } else if item.settings.is_none() {
            Style::default().fg(th.bad)
        } else {
            th.text()
        };
        let line = format!(
            "{} {:<28} {:<8}",
            if i == selected { "▶" } else { " " },
            item.name,
            item.origin
        );
        buf.set_stringn(
            inner.x,
            inner.y + row as u16,
            line,
            inner.width as usize,
            style,
        );
    }
    if let Some(item) = items.get(selected) {
        let desc = Rect {
            y: inner.y + list_h + 1,
            height: inner.height.saturating_sub(list_h + 1),
            ..inner
        };
        Paragraph::new(Span::styled(item.description.clone(), th.text()))
            .wrap(Wrap { trim: true })
            .render(desc, buf);
    }
}
