//! The popups over the main screen: an error, the save prompt, the preset
//! picker, the value chooser, and a chart's readout.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Widget, Wrap};

use super::look::*;
use crate::tui::text::ellipsize;
use crate::tui::theme::Theme;

pub(crate) fn error_popup(text: &str, area: Rect, buf: &mut Buffer, th: &Theme) {
    let w = (text.chars().count() as u16 + 4).clamp(30, area.width.saturating_sub(4));
    let r = popup(area, w, 5, buf);
    Paragraph::new(vec![
        Line::from(Span::styled(text.to_string(), Style::default().fg(th.bad))),
        Line::from(Span::styled("Esc (or any key) closes", th.dim())),
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
    items: &[crate::tui::state::PickItem],
    selected: usize,
    area: Rect,
    buf: &mut Buffer,
    th: &Theme,
) {
    let w = area.width.saturating_sub(4).min(110);
    let h = (items.len() as u16 + 8).min(area.height.saturating_sub(2));
    let r = popup(area, w, h, buf);
    let block = panel("presets: ↑↓ choose, Enter applies, Esc closes", th);
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

/// The value chooser of `key`: its values, the current one marked `(now)`,
/// greyed ones with why; the setting's help, and the highlighted value's
/// reason (or the last Enter's note) in full under the list.
#[allow(clippy::too_many_arguments)]
pub(crate) fn chooser(
    key: &str,
    items: &[crate::tui::state::Choice],
    selected: usize,
    note: Option<&str>,
    area: Rect,
    buf: &mut Buffer,
    th: &Theme,
) {
    let (r, list, first) = super::layout::chooser_geometry(area, items.len(), selected);
    Clear.render(r, buf);
    let title = format!("{key}: ↑↓ Enter sets · Esc closes");
    let block = panel(&title, th);
    let inner = block.inner(r);
    block.render(r, buf);
    let value_w = items
        .iter()
        .map(|c| c.value.chars().count())
        .max()
        .unwrap_or(0)
        .min(24);
    for (row, (i, c)) in items
        .iter()
        .enumerate()
        .skip(first)
        .take(list.height as usize)
        .enumerate()
    {
        let mut style = if c.why.is_some() {
            Style::default().fg(th.disabled)
        } else {
            th.text()
        };
        if i == selected {
            style = style.add_modifier(Modifier::REVERSED);
        }
        // A greyed value's reason, whole where it fits, else a short
        // word (the selected value's reason is whole under the list).
        let head = format!(
            "{} {:<value_w$}  ",
            if i == selected { "▶" } else { " " },
            ellipsize(&c.value, value_w),
        );
        let room = (list.width as usize).saturating_sub(head.chars().count());
        let tail = match (&c.why, c.current) {
            (_, true) => "(now)".to_string(),
            (Some(why), _) if why.chars().count() <= room => why.clone(),
            (Some(_), _) if room >= 11 => "unavailable".to_string(),
            _ => String::new(),
        };
        let line = format!("{head}{tail}");
        buf.set_stringn(
            list.x,
            list.y + row as u16,
            ellipsize(&line, list.width as usize),
            list.width as usize,
            style,
        );
    }
    let below = Rect {
        y: list.y + list.height + 1,
        height: inner.height.saturating_sub(list.height + 1),
        ..inner
    };
    let mut lines = Vec::new();
    let why = note.map(str::to_string).or_else(|| {
        items
            .get(selected)
            .and_then(|c| c.why.as_ref())
            .map(|w| format!("{} cannot be used here: {w}", items[selected].value))
    });
    match why {
        Some(w) => lines.push(Line::from(Span::styled(w, Style::default().fg(th.warn)))),
        None => {
            let help = crate::settings::key_info(key).map_or("", |k| k.help);
            lines.push(Line::from(Span::styled(help.to_string(), th.dim())));
        }
    }
    Paragraph::new(lines)
        .wrap(Wrap { trim: true })
        .render(below, buf);
}

/// A chart's readout at `t_s`: a small box in the chart's plot beside the
/// cursor line (right of it where it fits, else left), with the interval's
/// time, each series' value and the changes marked in it.
pub(crate) fn readout_box(
    app: &crate::tui::app::App,
    kind: crate::tui::state::ChartKind,
    chart: Rect,
    t_s: f64,
    th: &Theme,
    buf: &mut Buffer,
) {
    use super::chart;
    let Some(p) = chart::plot_rect(chart, super::layout::strip(kind)) else {
        return;
    };
    let (t0, t1) = super::layout::chart_span(app);
    if t_s < t0 || t_s > t1 {
        return;
    }
    let (_, per) = chart::time_of_col(t0, t1, p.width, 0);
    let lines = super::timecharts::readout_lines(app, kind, t_s, per, th);
    let w = (lines
        .iter()
        .map(|(l, _)| l.chars().count())
        .max()
        .unwrap_or(0) as u16
        + 2)
    .min(p.width);
    // The plot's rows, the time axis under them and the number strip
    // over them (a marker's number is in the readout too).
    let top = if p.y > chart.y + 1 { p.y - 1 } else { p.y };
    let h = (lines.len() as u16 + 2).min(p.y + p.height + 1 - top);
    let col = chart::col_of(t0, t1, p.width, t_s);
    let x = if col + 2 + w <= p.width {
        p.x + col + 2
    } else {
        p.x + col.saturating_sub(w + 1)
    };
    let r = Rect {
        x,
        y: top,
        width: w,
        height: h,
    };
    Clear.render(r, buf);
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(Style::default().fg(th.title))
        .title(Span::styled("Esc", th.dim()));
    let inner = block.inner(r);
    block.render(r, buf);
    for (i, (text, color)) in lines.iter().take(inner.height as usize).enumerate() {
        buf.set_stringn(
            inner.x,
            inner.y + i as u16,
            ellipsize(text, inner.width as usize),
            inner.width as usize,
            Style::default().fg(*color),
        );
    }
}
