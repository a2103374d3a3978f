//! The settings panel: every setting, its value, its key, greyed with the
//! reason when the machine limits it, and the running value when it differs,
//! the cursor's row highlighted; and the event log under it, which can be
//! scrolled back. Where each row lies ([`side_split`], [`setting_keyed`]) is
//! also what the mouse and the cursor keys go by.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Widget};

use super::look::*;
use crate::settings::KEYS;
use crate::tui::app::App;
use crate::tui::keys::{self};
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
    let (lines, top, bottom) = side_split(app, th, wide, area);
    let log_h = bottom.height;
    let lines: Vec<Line> = lines
        .into_iter()
        .map(|(mut line, key)| {
            if key.is_some() && key == app.view.cursor() {
                for span in &mut line.spans {
                    span.style = span.style.add_modifier(Modifier::REVERSED);
                }
            }
            line
        })
        .collect();
    let title = match app.show.preset() {
        Some((name, _)) => format!("settings · {name}"),
        None => "settings".to_string(),
    };
    Paragraph::new(lines)
        .block(panel(&title, th))
        .render(top, buf);
    if log_h >= 3 {
        // Wrapped by hand so the newest line shown always stays in view;
        // whole entries only, newest last (never the tail of one cut at
        // the top). An entry longer than the panel shows its start and
        // says where the rest is.
        let width = area.width.saturating_sub(2) as usize;
        let n = (log_h - 2) as usize;
        let entries: Vec<Vec<Line>> = app
            .log
            .shown()
            .map(|(_, (t, text, notice))| event_rows(*t, text, *notice, width, th))
            .collect();
        let mut start = entries.len();
        let mut used = 0;
        while start > 0 && used + entries[start - 1].len() <= n {
            start -= 1;
            used += entries[start].len();
        }
        let mut rows: Vec<Line> = match (start == entries.len(), entries.last()) {
            (true, Some(newest)) => {
                let mut head: Vec<Line> = newest[..n.saturating_sub(1)].to_vec();
                head.push(Line::from(Span::styled(
                    "  … whole in the summary (q)",
                    th.dim(),
                )));
                head
            }
            _ => entries[start..].concat(),
        };
        let skip = rows.len().saturating_sub(n);
        let recs: Vec<_> = app.window.now_records().filter(|r| !r.paused).collect();
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
        // Scrolled back: say so, and how many lines are below.
        let title = match app.log.anchor() {
            Some(a) => {
                let below = app.log.newest().saturating_sub(a);
                let full = format!("events ↑ {below} newer below · wheel ↓");
                if full.chars().count() <= room {
                    full
                } else {
                    format!("events ↑ {below} newer")
                }
            }
            None => title,
        };
        Paragraph::new(rows.split_off(skip))
            .block(panel(&title, th))
            .render(bottom, buf);
    }
}

/// A log line as the events panel shows it, wrapped `width` wide: its
/// time, then the text at spaces, continuation lines indented.
pub(crate) fn event_rows(
    t: f64,
    text: &str,
    notice: bool,
    width: usize,
    th: &Theme,
) -> Vec<Line<'static>> {
    let style = if notice {
        Style::default().fg(th.warn)
    } else {
        Style::default().fg(th.marker)
    };
    let stamp = format!("{:>6} ", fmt_t(t));
    let first_w = width.saturating_sub(stamp.len()).max(1);
    let rest_w = width.saturating_sub(2).max(1);
    // Wrapped at spaces: a word is never cut where it fits a line.
    let chunks = crate::tui::text::wrap_words(text, first_w, rest_w);
    chunks
        .into_iter()
        .enumerate()
        .map(|(k, c)| {
            let lead = if k == 0 { stamp.clone() } else { "  ".into() };
            Line::from(vec![Span::styled(lead, th.dim()), Span::styled(c, style)])
        })
        .collect()
}

/// Columns a reason is indented by under its setting.
const REASON_INDENT: usize = 5;

/// Lines the events panel keeps before every setting is listed (half that
/// before only the keyed and the changed ones are, with their reasons):
/// the settings do not squeeze the events to a few lines (160x48).
const EVENTS_WITH_REASONS: u16 = 8;

/// Which greyed settings get their reason on a line under them.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reasons {
    /// Every one.
    All,
    /// Those a key changes (the ones a user reaches for).
    Keyed,
    /// None.
    None,
}

/// The side panel split: the settings lines it shows (each with its
/// setting, if it is a setting's row), the settings panel and the events
/// panel under it. Every setting with every greyed one's reason, if that
/// leaves the events [`EVENTS_WITH_REASONS`] lines; else with the reasons
/// of the keyed ones only; else without reasons; else only the settings
/// a key changes and the changed ones, with their reasons where the events
/// keep half that; else without; always with room for one events line.
pub(crate) fn side_split(
    app: &App,
    th: &Theme,
    wide: bool,
    area: Rect,
) -> (Vec<(Line<'static>, Option<&'static str>)>, Rect, Rect) {
    let fits_with = |l: &Vec<(Line<'static>, Option<&'static str>)>, events: u16| {
        l.len() as u16 + 2 + 2 + events <= area.height
    };
    // A reason wraps under its setting, indented, never cut.
    let room = area.width.saturating_sub(2 + REASON_INDENT as u16) as usize;
    let keyed = |only: bool, reasons: Reasons| setting_keyed(app, th, wide, room, only, reasons);
    // The events panel keeps most of its room: every reason only where
    // it still has EVENTS_WITH_REASONS lines.
    let events = EVENTS_WITH_REASONS;
    let lines = [
        (false, Reasons::All, events),
        (false, Reasons::Keyed, events),
        (false, Reasons::None, events),
        (true, Reasons::Keyed, events / 2),
        (true, Reasons::None, 1),
    ]
    .into_iter()
    .map(|(only, reasons, events)| (keyed(only, reasons), events))
    .find(|(l, events)| fits_with(l, *events))
    .map_or_else(|| keyed(true, Reasons::None), |(l, _)| l);
    let settings_h = (lines.len() as u16 + 2).min(area.height);
    let log_h = area.height - settings_h;
    let [top, bottom] =
        Layout::vertical([Constraint::Length(settings_h), Constraint::Length(log_h)]).areas(area);
    (lines, top, bottom)
}

/// The settings panel's lines, each with the setting it shows (None for a
/// section header or a reason): every key by section (with the reason of
/// each greyed one under it when `reasons` and `wide`; without `reasons`,
/// also without the model's queue and cache knobs while the kernel is the
/// target), or (`keyed_only`) just the ones a key changes, without section
/// headers or reasons. The `[kernel]` knobs show only when the kernel is
/// the target, a quiet setting only when it is not at its default.
pub(crate) fn setting_keyed(
    app: &App,
    th: &Theme,
    wide: bool,
    room: usize,
    keyed_only: bool,
    reasons: Reasons,
) -> Vec<(Line<'static>, Option<&'static str>)> {
    let mut lines = Vec::new();
    let mut section = "";
    let kernel = app.running.settings().workload.target == crate::settings::Target::Kernel;
    let defaults = crate::settings::Settings::default();
    for k in KEYS {
        // A rarely changed refinement shows once it is changed.
        if k.quiet && app.running.settings().get(k.key) == defaults.get(k.key) {
            continue;
        }
        let Some((sec, name)) = k.key.split_once('.') else {
            continue;
        };
        // The kernel target's knobs, only when it is the target.
        if sec == "kernel" && !kernel {
            continue;
        }
        let key = keys::setting_keys(k.key.name());
        // Short of room: the settings a key changes, and the others only
        // where they differ from their default.
        if keyed_only && key.is_none() && app.running.settings().get(k.key) == defaults.get(k.key) {
            continue;
        }
        // Short of room, the model's queue and cache knobs make way for
        // the kernel's while the kernel is the target (they do nothing then).
        if reasons == Reasons::None
            && kernel
            && model_only(k.key.name(), app.running.features().kernel_switches)
        {
            continue;
        }
        if sec != section && !keyed_only {
            section = sec;
            lines.push((Line::from(Span::styled(format!("[{sec}]"), th.dim())), None));
        }
        let value = app.running.settings().get(k.key).unwrap_or_default();
        let running = app.running.effective().get(k.key).unwrap_or_default();
        let why = app.running.unavailable(k.key.name());
        let style = if why.is_some() {
            Style::default().fg(th.disabled)
        } else {
            th.text()
        };
        let name_w = if wide { 14 } else { 10 };
        let name = crate::tui::text::fit_name(name, name_w);
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
        lines.push((Line::from(spans), Some(k.key.name())));
        let show_reason = match reasons {
            Reasons::All => true,
            Reasons::Keyed => key.is_some(),
            Reasons::None => false,
        };
        if let Some(why) = why
            && wide
            && show_reason
        {
            for l in crate::tui::text::wrap_words(&why, room, room) {
                lines.push((
                    Line::from(Span::styled(
                        format!("{:REASON_INDENT$}{l}", ""),
                        Style::default()
                            .fg(th.disabled)
                            .add_modifier(Modifier::ITALIC),
                    )),
                    None,
                ));
            }
        }
    }
    lines
}

/// A setting only the model uses (the kernel target greys it): its scope
/// in the settings table.
fn model_only(key: &str, switches: bool) -> bool {
    crate::settings::key_info(key).is_some_and(|k| k.kernel_note(switches).is_some())
}
