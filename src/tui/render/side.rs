//! The settings panel: every setting, its value, its key, greyed with the
//! reason when the machine limits it, and the running value when it differs;
//! and the event log under it.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Widget};

use crate::settings::KEYS;
use crate::tui::app::App;
use crate::tui::keys::{self};
use crate::tui::look::*;
use crate::tui::theme::Theme;

/// `cache_title`: name the page cache's hit rate in the event log's title
/// (where no stages panel shows it).
pub(crate) fn render_side(
    app: &App,
    th: &Theme,
    wide: bool,
    cache_title: bool,
    area: Rect,
    buf: &mut Buffer,
) {
    // Everything, if it fits; else every setting that applies, without the
    // reasons of the greyed ones; else only the settings a key changes.
    // Fits with room left for an events panel of at least one line.
    let fits = |l: &Vec<Line<'static>>| l.len() as u16 + 2 + 3 <= area.height;
    let full = setting_lines(app, th, wide, false, true);
    let lines = if fits(&full) {
        full
    } else {
        let bare = setting_lines(app, th, wide, false, false);
        if fits(&bare) {
            bare
        } else {
            setting_lines(app, th, wide, true, false)
        }
    };
    let settings_h = (lines.len() as u16 + 2).min(area.height);
    let log_h = area.height - settings_h;
    let [top, bottom] =
        Layout::vertical([Constraint::Length(settings_h), Constraint::Length(log_h)]).areas(area);
    let title = match &app.preset {
        Some((name, _)) => format!("settings · {name}"),
        None => "settings".to_string(),
    };
    Paragraph::new(lines)
        .block(panel(&title, th))
        .render(top, buf);
    if log_h >= 3 {
        // Wrapped by hand so the newest line always stays in view.
        let width = area.width.saturating_sub(2) as usize;
        let mut rows: Vec<Line> = Vec::new();
        for (t, text, notice) in &app.log {
            let style = if *notice {
                Style::default().fg(th.warn)
            } else {
                Style::default().fg(th.marker)
            };
            let stamp = format!("{:>6} ", fmt_t(*t));
            let first_w = width.saturating_sub(stamp.len()).max(1);
            let rest_w = width.saturating_sub(2).max(1);
            // Wrapped at spaces: a word is never cut where it fits a line.
            let chunks = crate::tui::look::wrap_words(text, first_w, rest_w);
            for (k, c) in chunks.into_iter().enumerate() {
                let lead = if k == 0 { stamp.clone() } else { "  ".into() };
                rows.push(Line::from(vec![
                    Span::styled(lead, th.dim()),
                    Span::styled(c, style),
                ]));
            }
        }
        let n = (log_h - 2) as usize;
        let skip = rows.len().saturating_sub(n);
        let recs: Vec<_> = app.now_records().filter(|r| !r.paused).collect();
        // The whole line where it fits the border, else the hit rate alone.
        let room = area.width.saturating_sub(4) as usize;
        let title = match super::stages::cache_line(&recs) {
            Some(c) if cache_title => {
                let full = format!("events · {c}");
                if full.chars().count() <= room {
                    full
                } else {
                    format!("events · {}", c.split(" · ").next().unwrap_or(""))
                }
            }
            _ => "events".to_string(),
        };
        Paragraph::new(rows.split_off(skip))
            .block(panel(&title, th))
            .render(bottom, buf);
    }
}

/// The settings panel's lines: every key by section (with the reason of
/// each greyed one under it when `reasons` and `wide`; without `reasons`,
/// also without the model's queue and cache knobs while the kernel is the
/// target), or (`keyed_only`) just the ones a key changes, without section
/// headers or reasons. The `[kernel]` knobs show only when the kernel is
/// the target.
pub(crate) fn setting_lines(
    app: &App,
    th: &Theme,
    wide: bool,
    keyed_only: bool,
    reasons: bool,
) -> Vec<Line<'static>> {
    let mut lines = Vec::new();
    let mut section = "";
    let kernel = app.settings.workload.target == crate::settings::Target::Kernel;
    for k in KEYS {
        let Some((sec, name)) = k.key.split_once('.') else {
            continue;
        };
        // The kernel target's knobs, only when it is the target.
        if sec == "kernel" && !kernel {
            continue;
        }
        let key = keys::setting_keys(k.key);
        if keyed_only && key.is_none() {
            continue;
        }
        // Short of room, the model's queue and cache knobs make way for
        // the kernel's while the kernel is the target (they do nothing then).
        if !reasons && kernel && model_only(k.key) {
            continue;
        }
        if sec != section && !keyed_only {
            section = sec;
            lines.push(Line::from(Span::styled(format!("[{sec}]"), th.dim())));
        }
        let value = app.settings.get(k.key).unwrap_or_default();
        let running = app.effective.get(k.key).unwrap_or_default();
        let why = app.unavailable(k.key);
        let style = if why.is_some() {
            Style::default().fg(th.disabled)
        } else {
            th.text()
        };
        let name_w = if wide { 14 } else { 10 };
        let name = crate::tui::look::ellipsize(name, name_w);
        let mut spans = vec![
            Span::styled(format!("{:>2} ", key.as_deref().unwrap_or("")), th.title()),
            Span::styled(format!("{name:<name_w$} "), style),
            Span::styled(
                value.clone(),
                if why.is_some() {
                    style
                } else {
                    style.add_modifier(Modifier::BOLD)
                },
            ),
        ];
        if running != value {
            spans.push(Span::styled(
                format!(" → {running}"),
                Style::default().fg(th.warn),
            ));
        }
        lines.push(Line::from(spans));
        if let Some(why) = why
            && wide
            && reasons
            && !keyed_only
        {
            lines.push(Line::from(Span::styled(
                format!("     {why}"),
                Style::default()
                    .fg(th.disabled)
                    .add_modifier(Modifier::ITALIC),
            )));
        }
    }
    lines
}

/// A setting only the model uses (the kernel target greys it).
fn model_only(key: &str) -> bool {
    key.starts_with("workers.")
        || matches!(
            key,
            "cache.size"
                | "cache.read_ahead"
                | "cache.device"
                | "workload.completion"
                | "pipeline.corrupt_every"
        )
}
