//! Draws the explorer from an [`App`]: a pure function of the state, so every
//! screen can be snapshot-tested on a `TestBackend` from fixed records.
//!
//! ```text
//!  readpath ▶ running 00:01:23 │ io_uring ✓ NO_IOWAIT ✓ AES ✓ SHA ✓ highpri ✓ │ ui 0.4% 0.8ms
//! ┌settings──────────┐┌latency p50 p99 p99.9 (log)─────────────────────────────┐
//! │workers.mode  [w] ││                                                        │
//! │...               │└────────────────────────────────────────────────────────┘
//! │                  │┌throughput MiB/s, IOPS──────────────────────────────────┐
//! │                  │└────────────────────────────────────────────────────────┘
//! │                  │┌scheduler latency: queue p99, run_delay/s───────────────┐
//! ├log───────────────┤└────────────────────────────────────────────────────────┘
//! │12.5s mode: ...   │┌distribution───┐┌stages / CPUs───┐┌baseline vs now──────┐
//! └──────────────────┘└───────────────┘└────────────────┘└─────────────────────┘
//!  w workers  W verify  h highpri  i sleep ...                        ? help  q quit
//! ```
//!
//! Panels drop by priority as the terminal shrinks: the bottom row first,
//! then the log, then the settings narrow to values only; below
//! [`MIN_WIDTH`]x[`MIN_HEIGHT`] a message names the size needed. Where
//! each panel lies is [`layout::main_layout`], which the mouse reads too.

use ratatui::Frame;
use ratatui::buffer::Buffer;
use ratatui::layout::{Alignment, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Widget, Wrap};

mod baseline;
pub mod chart;
mod distribution;
mod footer;
mod header;
mod help;
pub mod layout;
pub(crate) mod look;
mod popups;
mod present;
mod side;
mod stages;
mod timecharts;
mod timeline;

use super::app::App;
use super::state::Overlay;
use super::theme::Theme;
use baseline::*;
use distribution::*;
use footer::*;
use header::*;
pub use look::{Look, ascii_for, asciify, popup};
use popups::*;
use side::*;
use stages::*;
use timecharts::*;
use timeline::render_timeline;

/// Narrowest terminal the explorer draws in.
pub const MIN_WIDTH: u16 = 60;
/// Lowest terminal the explorer draws in.
pub const MIN_HEIGHT: u16 = 18;

/// Draws the whole screen.
pub fn draw(f: &mut Frame, app: &App, look: &Look) {
    let area = f.area();
    let buf = f.buffer_mut();
    render(app, look, area, buf);
}

/// Draws into a buffer (what [`draw`] does; also used by tests).
pub fn render(app: &App, look: &Look, area: Rect, buf: &mut Buffer) {
    if area.width < MIN_WIDTH || area.height < MIN_HEIGHT {
        too_small(area, buf, &look.theme);
    } else {
        if app.view.present() {
            let stage = Look {
                theme: present::high_contrast(),
                ascii: look.ascii,
            };
            present::render(app, &stage, area, buf);
        } else {
            main_screen(app, look, area, buf);
        }
        render_overlay(app, look, area, buf);
    }
    if look.ascii {
        asciify(buf, area);
    }
}

/// Draws the open overlay (help, error, picker, save dialog, chooser, prompt) over the screen.
fn render_overlay(app: &App, look: &Look, area: Rect, buf: &mut Buffer) {
    match app.overlays.current() {
        Overlay::None => {}
        Overlay::Help {
            scroll,
            find,
            typing,
        } => help::render(
            area,
            buf,
            &look.theme,
            app.running.mode(),
            *scroll,
            find,
            *typing,
        ),
        Overlay::Error(text) => error_popup(text, area, buf, &look.theme),
        Overlay::Picker { items, selected } => picker(items, *selected, area, buf, &look.theme),
        Overlay::SaveName {
            name,
            selected,
            refused,
        } => prompt(
            " save preset ",
            save_lines(name, *selected, refused.as_deref(), &look.theme),
            area,
            buf,
            &look.theme,
        ),
        Overlay::Chooser {
            key,
            items,
            selected,
            note,
        } => chooser(
            key,
            items,
            *selected,
            note.as_deref(),
            area,
            buf,
            &look.theme,
        ),
        Overlay::Prompt {
            text, error, hint, ..
        } => {
            let th = &look.theme;
            prompt(
                " set ",
                prompt_lines(text, error.as_deref(), hint.as_deref(), th),
                area,
                buf,
                th,
            )
        }
        Overlay::ConfirmOverwrite(name) => prompt(
            " replace? ",
            vec![Line::from(Span::styled(
                format!("a preset named {name:?} exists: replace it? (y/n; Esc cancels)"),
                Style::default().fg(look.theme.warn),
            ))],
            area,
            buf,
            &look.theme,
        ),
    }
}

/// The save dialog's lines: the name (selected or being typed), the keys, where it goes, and why a key was refused.
fn save_lines(name: &str, selected: bool, refused: Option<&str>, th: &Theme) -> Vec<Line<'static>> {
    let shown = if selected {
        Span::styled(
            name.to_string(),
            th.title().add_modifier(Modifier::REVERSED),
        )
    } else {
        Span::styled(format!("{name}_"), th.title())
    };
    let mut lines = vec![
        Line::from(vec![Span::styled("name: ", th.dim()), shown]),
        Line::from(Span::styled(
            if selected {
                "typing replaces the name, \u{2192} keeps it; Enter saves, Esc cancels"
            } else {
                "Enter saves, Esc cancels"
            },
            th.dim(),
        )),
        Line::from(Span::styled(
            format!(
                "saved to {}/<name>.toml",
                crate::scenario::preset::user_dir().map_or("?".into(), |d| d.display().to_string())
            ),
            th.dim(),
        )),
    ];
    if let Some(why) = refused {
        lines.push(Line::from(Span::styled(
            why.to_string(),
            Style::default().fg(th.warn),
        )));
    }
    lines
}

/// The `:` prompt's lines: the text being typed, its error or hint, and the keys.
fn prompt_lines(
    text: &str,
    error: Option<&str>,
    hint: Option<&str>,
    th: &Theme,
) -> Vec<Line<'static>> {
    let mut lines = vec![Line::from(vec![
        Span::styled(":", th.title()),
        Span::styled(format!("{text}_"), th.title()),
    ])];
    match (error, hint) {
        (Some(e), _) => lines.push(Line::from(Span::styled(
            e.to_string(),
            Style::default().fg(th.bad),
        ))),
        (None, Some(h)) => lines.push(Line::from(Span::styled(h.to_string(), th.text()))),
        (None, None) => {}
    }
    lines.push(Line::from(Span::styled(
        "set section.key=value as --set takes it · Tab completes · ↑ recalls · Enter applies · Esc cancels",
        th.dim(),
    )));
    lines
}

fn too_small(area: Rect, buf: &mut Buffer, th: &Theme) {
    let text = vec![
        Line::from(Span::styled("readpath: terminal too small", th.title())),
        Line::from(format!(
            "needs at least {MIN_WIDTH}x{MIN_HEIGHT}, this one is {}x{}",
            area.width, area.height
        )),
        Line::from(Span::styled("enlarge it, or press q to quit", th.dim())),
    ];
    let h = (text.len() as u16).min(area.height);
    let y = area.y + area.height.saturating_sub(h) / 2;
    Paragraph::new(text)
        .alignment(Alignment::Center)
        .wrap(Wrap { trim: true })
        .render(
            Rect {
                y,
                height: h,
                ..area
            },
            buf,
        );
}

fn main_screen(app: &App, look: &Look, area: Rect, buf: &mut Buffer) {
    use super::state::ChartKind;
    let th = &look.theme;
    let l = layout::main_layout(app, area);
    render_header(app, th, l.header, buf);
    render_footer(app, th, l.footer, buf);
    if let Some((side, wide)) = l.side {
        render_side(app, th, wide, l.bottom.is_none(), side, buf);
    }
    for &(kind, r) in &l.charts {
        match kind {
            ChartKind::Latency => latency_chart(app, look, r, buf),
            ChartKind::Throughput => throughput_chart(app, look, r, buf),
            ChartKind::Sched => sched_chart(app, look, r, buf),
        }
    }
    if let Some(r) = l.timeline {
        render_timeline(app, look, r, buf);
    }
    if let Some(r) = l.baseline_inline {
        render_baseline(app, th, r, buf);
    }
    // A chart clicked: the cursor on every chart, the values on the one.
    if let Some(ro) = app.view.readout() {
        for &(kind, r) in &l.charts {
            layout::draw_cursor(app, kind, r, ro.t_s, th, buf);
        }
        if let Some(&(kind, r)) = l.charts.iter().find(|c| c.0 == ro.chart) {
            readout_box(app, kind, r, ro.t_s, th, buf);
        }
    }
    if let Some(cols) = l.bottom {
        render_distribution(app, th, cols[0], buf);
        render_stages(app, th, cols[1], buf);
        render_baseline(app, th, cols[2], buf);
    }
    // The focus (Tab, a click), or the settings panel while its cursor is.
    let focused = app.view.focus().or(app.view.cursor().map(|_| "settings"));
    for r in focused.map_or(vec![], |t| layout::focus_rects(&l, t)) {
        look::focus_frame(r, th, buf);
    }
}
