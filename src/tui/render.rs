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
//! [`MIN_WIDTH`]x[`MIN_HEIGHT`] a message names the size needed.

use ratatui::Frame;
use ratatui::buffer::Buffer;
use ratatui::layout::{Alignment, Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::symbols::Marker as Dots;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Widget, Wrap};

use super::app::{App, Overlay, WindowStats};
use super::chart::{Scale, Series, TimeChart, fmt_secs};
use super::help;
use super::keys::{self, Footer};
use super::theme::Theme;
use crate::metrics::{BUCKETS_PER_OCTAVE, IntervalRecord, LatencyBuckets};
use crate::output::format::{fmt_count, fmt_rate, fmt_us};
use crate::settings::KEYS;

/// Narrowest terminal the explorer draws in.
pub const MIN_WIDTH: u16 = 60;
/// Lowest terminal the explorer draws in.
pub const MIN_HEIGHT: u16 = 18;

/// How to draw: colours and which characters the terminal can show.
#[derive(Debug, Clone, Copy)]
pub struct Look {
    /// Colours.
    pub theme: Theme,
    /// Only ASCII characters (no Braille, no box drawing).
    pub ascii: bool,
}

impl Look {
    fn dots(&self) -> Dots {
        if self.ascii {
            Dots::Custom('*')
        } else {
            Dots::Braille
        }
    }
}

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
        if app.present {
            let stage = Look {
                theme: super::present::high_contrast(),
                ascii: look.ascii,
            };
            super::present::render(app, &stage, area, buf);
        } else {
            main_screen(app, look, area, buf);
        }
        match &app.overlay {
            Overlay::None => {}
            Overlay::Help => help::render(area, buf, &look.theme),
            Overlay::Error(text) => error_popup(text, area, buf, &look.theme),
            Overlay::Picker { items, selected } => picker(items, *selected, area, buf, &look.theme),
            Overlay::SaveName(name) => prompt(
                " save preset ",
                vec![
                    Line::from(vec![
                        Span::styled("name: ", look.theme.dim()),
                        Span::styled(format!("{name}_"), look.theme.title()),
                    ]),
                    Line::from(Span::styled(
                        format!(
                            "saved to {}/<name>.toml; Enter saves, Esc cancels",
                            crate::scenario::preset::user_dir()
                                .map_or("?".into(), |d| d.display().to_string())
                        ),
                        look.theme.dim(),
                    )),
                ],
                area,
                buf,
                &look.theme,
            ),
            Overlay::ConfirmOverwrite(name) => prompt(
                " replace? ",
                vec![Line::from(Span::styled(
                    format!("a preset named {name:?} exists: replace it? (y/n)"),
                    Style::default().fg(look.theme.warn),
                ))],
                area,
                buf,
                &look.theme,
            ),
        }
    }
    if look.ascii {
        asciify(buf, area);
    }
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
    let th = &look.theme;
    let [header, body, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(0),
        Constraint::Length(1),
    ])
    .areas(area);
    render_header(app, th, header, buf);
    render_footer(app, th, footer, buf);

    let side_w = if area.width >= 120 {
        40
    } else if area.width >= 80 {
        31
    } else {
        0
    };
    let [side, main] =
        Layout::horizontal([Constraint::Length(side_w), Constraint::Min(0)]).areas(body);
    if side_w > 0 {
        render_side(app, th, side_w >= 40, side, buf);
    }
    // The bottom row appears once the charts have room above it.
    let bottom_h = if main.height >= 34 {
        main.height / 3
    } else {
        0
    };
    let [charts, bottom] =
        Layout::vertical([Constraint::Min(0), Constraint::Length(bottom_h)]).areas(main);
    let baseline_inline = bottom_h == 0 && app.baseline.is_some();
    let mut rows = vec![Constraint::Fill(4), Constraint::Fill(3)];
    if baseline_inline {
        rows.push(Constraint::Length(10));
    } else {
        rows.push(Constraint::Fill(3));
    }
    let parts = Layout::vertical(rows).split(charts);
    latency_chart(app, look, parts[0], buf);
    throughput_chart(app, look, parts[1], buf);
    if baseline_inline {
        render_baseline(app, th, parts[2], buf);
    } else {
        sched_chart(app, look, parts[2], buf);
    }
    if bottom_h > 0 {
        let cols = Layout::horizontal([
            Constraint::Fill(4),
            Constraint::Fill(4),
            Constraint::Fill(5),
        ])
        .split(bottom);
        render_distribution(app, th, cols[0], buf);
        render_stages(app, th, cols[1], buf);
        render_baseline(app, th, cols[2], buf);
    }
}

fn mark(ok: bool, th: &Theme) -> Span<'static> {
    if ok {
        Span::styled("✓", Style::default().fg(th.good))
    } else {
        Span::styled("✗", Style::default().fg(th.bad))
    }
}

fn render_header(app: &App, th: &Theme, area: Rect, buf: &mut Buffer) {
    let f = &app.features;
    let t = app.elapsed_s as u64;
    let what = app.replay.as_deref().unwrap_or("running");
    let state = if app.paused {
        let text = match &app.replay {
            Some(r) => format!(" ⏸ paused ({r}) "),
            None => " ⏸ paused ".to_string(),
        };
        Span::styled(
            text,
            Style::default().fg(th.warn).add_modifier(Modifier::BOLD),
        )
    } else {
        Span::styled(
            format!(" ▶ {what} "),
            Style::default().fg(th.good).add_modifier(Modifier::BOLD),
        )
    };
    let mut spans = vec![
        Span::styled("readpath", th.title()),
        state,
        Span::styled(
            format!("{:02}:{:02}:{:02}", t / 3600, t / 60 % 60, t % 60),
            th.text(),
        ),
        Span::styled(" │ ", th.dim()),
    ];
    // Failed reads are never counted as good data; say so loudly.
    for (n, what) in [
        (app.verity_failures, "verity failures"),
        (app.io_errors, "I/O errors"),
    ] {
        if n > 0 {
            spans.push(Span::styled(
                format!("✗ {n} {what}"),
                Style::default().fg(th.bad).add_modifier(Modifier::BOLD),
            ));
            spans.push(Span::styled(" │ ", th.dim()));
        }
    }
    for (name, ok) in [
        ("io_uring", f.io_uring),
        ("NO_IOWAIT", f.no_iowait),
        ("AES", f.aes_instructions),
        ("SHA", f.sha_instructions),
        ("highpri", f.highpri),
    ] {
        spans.push(Span::styled(name, th.text()));
        spans.push(mark(ok, th));
        spans.push(Span::raw(" "));
    }
    spans.push(Span::styled("│ ", th.dim()));
    spans.push(Span::styled(app.plan.clone(), th.text()));
    let left = Line::from(spans);
    let used = left.width() as u16;
    left.render(area, buf);
    // The UI's own cost, where it does not cover the plan.
    let ui = format!(
        " │ ui {:.1}% cpu {:.1}ms/frame ≤{:.0}Hz",
        app.ui.cpu_pct, app.ui.frame_ms, app.ui.fps
    );
    let short = format!(" │ ui {:.1}% {:.1}ms", app.ui.cpu_pct, app.ui.frame_ms);
    for text in [ui, short] {
        let w = text.chars().count() as u16;
        if used + w <= area.width {
            buf.set_string(area.x + area.width - w, area.y, text, th.dim());
            break;
        }
    }
}

fn render_footer(app: &App, th: &Theme, area: Rect, buf: &mut Buffer) {
    // Keys that always show, at the right end: "  ? help  q quit".
    let always: Vec<(String, &str)> = keys::BINDINGS
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
    let caption = app.caption.as_ref().map(|c| format!("▶ {c}"));
    if let Some(c) = caption.filter(|_| app.flash_text().is_none()) {
        Line::from(Span::styled(
            format!(" {c}"),
            Style::default().fg(th.title).add_modifier(Modifier::BOLD),
        ))
        .render(area, buf);
    } else if let Some(msg) = app.flash_text() {
        let line = Line::from(vec![
            Span::styled(" ", th.text()),
            Span::styled(msg.to_string(), Style::default().fg(th.warn)),
        ]);
        line.render(area, buf);
    } else {
        // The others, in table order, as many as fit.
        let budget = (area.width as usize).saturating_sub(tail_w);
        let mut spans = Vec::new();
        let mut used = 0;
        for b in keys::BINDINGS {
            let Footer::IfRoom(what) = b.footer else {
                continue;
            };
            let k = b.compact();
            let n = k.chars().count() + what.chars().count() + 3;
            if used + n > budget {
                break;
            }
            used += n;
            spans.push(Span::styled(format!(" {k}"), th.title()));
            spans.push(Span::styled(format!(" {what} "), th.dim()));
        }
        Line::from(spans).render(area, buf);
    }
    let mut x = area.x + area.width.saturating_sub(tail_w as u16);
    for (text, style) in tail {
        buf.set_string(x, area.y, &text, style);
        x += text.chars().count() as u16;
    }
}

fn panel<'a>(title: &'a str, th: &Theme) -> Block<'a> {
    Block::default()
        .borders(Borders::ALL)
        .border_style(th.border())
        .title(Span::styled(format!(" {title} "), th.title()))
}

fn render_side(app: &App, th: &Theme, wide: bool, area: Rect, buf: &mut Buffer) {
    // Everything, if it fits; else only the settings a key changes.
    let full = setting_lines(app, th, wide, false);
    let lines = if full.len() as u16 + 2 <= area.height {
        full
    } else {
        setting_lines(app, th, wide, true)
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
            let body: Vec<char> = text.chars().collect();
            let first_w = width.saturating_sub(stamp.len()).max(1);
            let rest_w = width.saturating_sub(2).max(1);
            let mut chunks = vec![body.iter().take(first_w).collect::<String>()];
            let mut i = first_w;
            while i < body.len() {
                chunks.push(body[i..(i + rest_w).min(body.len())].iter().collect());
                i += rest_w;
            }
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
        Paragraph::new(rows.split_off(skip))
            .block(panel("events", th))
            .render(bottom, buf);
    }
}

/// The settings panel's lines: every key by section, or (`keyed_only`) just
/// the ones a key changes, without section headers or reasons.
fn setting_lines(app: &App, th: &Theme, wide: bool, keyed_only: bool) -> Vec<Line<'static>> {
    let mut lines = Vec::new();
    let mut section = "";
    for k in KEYS {
        let Some((sec, name)) = k.key.split_once('.') else {
            continue;
        };
        let key = keys::setting_keys(k.key);
        if keyed_only && key.is_none() {
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
        let name_w = if wide { 13 } else { 10 };
        let mut name = name.to_string();
        name.truncate(name_w);
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

fn fmt_t(t: f64) -> String {
    if t < 60.0 {
        format!("{t:.1}s")
    } else {
        fmt_secs(t)
    }
}

fn series(
    app: &App,
    name: &'static str,
    color: ratatui::style::Color,
    right: bool,
    f: impl Fn(&IntervalRecord) -> Option<f64>,
) -> Series {
    Series {
        name,
        color,
        right,
        points: app
            .history
            .iter()
            .filter(|r| !r.paused)
            .filter_map(|r| f(r).map(|v| (r.t_s, v)))
            .collect(),
    }
}

fn legend<'a>(title: &'a str, items: Vec<(String, ratatui::style::Color)>, th: &Theme) -> Line<'a> {
    let mut spans = vec![Span::styled(format!(" {title} "), th.title())];
    for (text, color) in items {
        spans.push(Span::styled(
            format!("━ {text}  "),
            Style::default().fg(color),
        ));
    }
    Line::from(spans)
}

fn time_chart<'a>(
    app: &'a App,
    look: &'a Look,
    title: Line<'a>,
    series: Vec<Series>,
    scale: Scale,
    fmt_left: super::chart::Fmt,
    fmt_right: super::chart::Fmt,
) -> TimeChart<'a> {
    TimeChart {
        title,
        series,
        t0: app.elapsed_s - app.window_s,
        t1: app.elapsed_s,
        scale,
        fmt_left,
        fmt_right,
        markers: &app.markers,
        dots: look.dots(),
        theme: &look.theme,
    }
}

fn latest(app: &App) -> Option<&IntervalRecord> {
    app.history.iter().rev().find(|r| !r.paused)
}

pub(super) fn latency_chart(app: &App, look: &Look, area: Rect, buf: &mut Buffer) {
    let th = &look.theme;
    let s = th.series;
    let last = latest(app);
    let v = |f: fn(&IntervalRecord) -> f64| last.map_or("-".into(), |r| fmt_us(f(r)));
    let title = legend(
        "latency (log)",
        vec![
            (format!("p50 {}", v(|r| r.latency_us.p50)), s[0]),
            (format!("p99 {}", v(|r| r.latency_us.p99)), s[1]),
            (format!("p99.9 {}", v(|r| r.latency_us.p999)), s[2]),
        ],
        th,
    );
    let pos = |v: f64| (v > 0.0).then_some(v);
    let series = vec![
        series(app, "p50", s[0], false, |r| pos(r.latency_us.p50)),
        series(app, "p99", s[1], false, |r| pos(r.latency_us.p99)),
        series(app, "p99.9", s[2], false, |r| pos(r.latency_us.p999)),
    ];
    time_chart(app, look, title, series, Scale::Log, fmt_us, fmt_count).render(area, buf);
}

fn throughput_chart(app: &App, look: &Look, area: Rect, buf: &mut Buffer) {
    let th = &look.theme;
    let s = th.series;
    let last = latest(app);
    let title = legend(
        "throughput",
        vec![
            (
                format!(
                    "MiB/s {}",
                    last.map_or("-".into(), |r| fmt_rate(r.throughput_mib_s))
                ),
                s[0],
            ),
            (
                format!(
                    "IOPS {} (right)",
                    last.map_or("-".into(), |r| fmt_count(r.iops))
                ),
                s[3],
            ),
        ],
        th,
    );
    let series = vec![
        series(app, "MiB/s", s[0], false, |r| Some(r.throughput_mib_s)),
        series(app, "IOPS", s[3], true, |r| Some(r.iops)),
    ];
    time_chart(app, look, title, series, Scale::Linear, fmt_rate, fmt_count).render(area, buf);
}

pub(super) fn sched_chart(app: &App, look: &Look, area: Rect, buf: &mut Buffer) {
    let th = &look.theme;
    let s = th.series;
    let last = latest(app);
    let rd = |r: &IntervalRecord| r.workers.run_delay_us / r.interval_s.max(1e-9) / 1e3;
    let title = legend(
        "scheduler latency",
        vec![
            (
                format!(
                    "queue p99 {}",
                    last.map_or("-".into(), |r| fmt_us(r.stages_us.queue.p99))
                ),
                s[1],
            ),
            (
                format!(
                    "run_delay {} ms/s (right)",
                    last.map_or("-".into(), |r| fmt_rate(rd(r)))
                ),
                s[2],
            ),
        ],
        th,
    );
    let series = vec![
        series(app, "queue p99", s[1], false, |r| {
            Some(r.stages_us.queue.p99)
        }),
        series(app, "run_delay", s[2], true, |r| Some(rd(r))),
    ];
    time_chart(app, look, title, series, Scale::Linear, fmt_us, fmt_rate).render(area, buf);
}

/// Bucket counts merged `group` at a time (to fit the rows), with the
/// group's lower edge in us.
fn grouped(counts: &[u64], group: usize) -> Vec<(f64, u64)> {
    counts
        .chunks(group)
        .enumerate()
        .map(|(i, c)| (LatencyBuckets::lower_edge_us(i * group), c.iter().sum()))
        .collect()
}

fn render_distribution(app: &App, th: &Theme, area: Rect, buf: &mut Buffer) {
    let now = app.now_buckets.clone();
    let base = app.baseline.as_ref().map(|b| b.buckets.clone());
    let title = if base.is_some() {
        "distribution: now ━ baseline │"
    } else {
        "latency distribution (now)"
    };
    let block = panel(title, th);
    let inner = block.inner(area);
    block.render(area, buf);
    if inner.height < 2 || now.is_empty() && base.is_none() {
        Paragraph::new(Span::styled("waiting for samples", th.dim())).render(inner, buf);
        return;
    }
    let n = now.len().max(base.as_ref().map_or(0, |b| b.len()));
    let nz = |v: &[u64]| {
        let first = v.iter().position(|&c| c > 0);
        let last = v.iter().rposition(|&c| c > 0);
        first.zip(last)
    };
    let mut range = nz(&now).unwrap_or((0, 0));
    if let Some((a, b)) = base.as_deref().and_then(nz) {
        range = (range.0.min(a), range.1.max(b));
    }
    // Groups of 1, 2 or 4 buckets (quarter, half, whole octaves) to fit.
    let rows = inner.height as usize;
    let group = [1, 2, BUCKETS_PER_OCTAVE]
        .into_iter()
        .find(|g| (range.1 / g - range.0 / g + 1) <= rows)
        .unwrap_or(BUCKETS_PER_OCTAVE);
    let pad = |v: &[u64]| {
        let mut v = v.to_vec();
        v.resize(n, 0);
        grouped(&v, group)
    };
    let now_g = pad(&now);
    let base_g = base.as_deref().map(pad);
    let total = |g: &[(f64, u64)]| g.iter().map(|x| x.1).sum::<u64>().max(1) as f64;
    let (tn, tb) = (total(&now_g), base_g.as_deref().map_or(1.0, total));
    let (first, last) = (range.0 / group, (range.1 / group).min(now_g.len() - 1));
    let label_w = 7usize;
    let pct_w = 6usize;
    let bar_w = (inner.width as usize)
        .saturating_sub(label_w + pct_w + 1)
        .max(1);
    let max_share = (first..=last)
        .map(|i| {
            let b = base_g.as_ref().map_or(0.0, |g| g[i].1 as f64 / tb);
            (now_g[i].1 as f64 / tn).max(b)
        })
        .fold(0.0, f64::max)
        .max(1e-9);
    for (row, i) in (first..=last).take(rows).enumerate() {
        let y = inner.y + row as u16;
        let share = now_g[i].1 as f64 / tn;
        let len = ((share / max_share) * bar_w as f64).round() as usize;
        buf.set_string(inner.x, y, format!("{:>6} ", fmt_us(now_g[i].0)), th.dim());
        buf.set_string(
            inner.x + label_w as u16,
            y,
            "━".repeat(len),
            Style::default().fg(th.series[0]),
        );
        if let Some(g) = &base_g {
            let b = g[i].1 as f64 / tb;
            if b > 0.0 {
                let x = ((b / max_share) * bar_w as f64).round() as usize;
                buf.set_string(
                    inner.x + (label_w + x.min(bar_w - 1)) as u16,
                    y,
                    "│",
                    Style::default()
                        .fg(th.baseline)
                        .add_modifier(Modifier::BOLD),
                );
            }
        }
        if share > 0.0 {
            buf.set_string(
                inner.x + (label_w + bar_w + 1) as u16,
                y,
                format!("{:>5.1}%", share * 100.0),
                th.text(),
            );
        }
    }
}

fn render_stages(app: &App, th: &Theme, area: Rect, buf: &mut Buffer) {
    let block = panel("stages (now) and CPUs (last 1s)", th);
    let inner = block.inner(area);
    block.render(area, buf);
    let recs: Vec<&IntervalRecord> = app.now_records().filter(|r| !r.paused).collect();
    let mean = |f: fn(&IntervalRecord) -> f64| {
        let n: u64 = recs.iter().map(|r| r.reads).sum();
        if n == 0 {
            0.0
        } else {
            recs.iter().map(|r| f(r) * r.reads as f64).sum::<f64>() / n as f64
        }
    };
    let stages = [
        ("device", mean(|r| r.stages_us.device.mean), th.series[3]),
        ("queue", mean(|r| r.stages_us.queue.mean), th.series[1]),
        ("decrypt", mean(|r| r.stages_us.decrypt.mean), th.series[0]),
        ("verify", mean(|r| r.stages_us.verify.mean), th.series[2]),
    ];
    let total: f64 = stages.iter().map(|s| s.1).sum::<f64>().max(1e-9);
    let bar_w = (inner.width as usize).saturating_sub(22).max(1);
    let mut y = inner.y;
    let bottom = inner.y + inner.height;
    if y < bottom {
        buf.set_string(inner.x, y, "mean per read", th.dim());
        y += 1;
    }
    for (name, us, color) in stages {
        if y >= bottom {
            return;
        }
        let len = (us / total * bar_w as f64).round() as usize;
        buf.set_string(
            inner.x,
            y,
            format!("{name:<8}{:>7} ", fmt_us(us)),
            th.text(),
        );
        buf.set_string(inner.x + 16, y, "█".repeat(len), Style::default().fg(color));
        buf.set_string(
            inner.x + 16 + bar_w as u16,
            y,
            format!("{:>4.0}%", us / total * 100.0),
            th.dim(),
        );
        y += 1;
    }
    // Per-CPU busy and iowait, averaged over the last second.
    let lastsec: Vec<&IntervalRecord> = app
        .history
        .iter()
        .rev()
        .take_while(|r| app.elapsed_s - r.t_s < 1.0)
        .collect();
    let ncpu = lastsec.first().map_or(0, |r| r.cpus.len());
    if y < bottom && ncpu > 0 {
        buf.set_string(inner.x, y, "CPU  busy ", th.dim());
        buf.set_string(inner.x + 10, y, "█", Style::default().fg(th.busy));
        buf.set_string(inner.x + 12, y, "iowait ", th.dim());
        buf.set_string(inner.x + 19, y, "▒", Style::default().fg(th.iowait));
        y += 1;
    }
    let bar_w = (inner.width as usize).saturating_sub(18).max(1);
    for cpu in 0..ncpu {
        if y >= bottom {
            return;
        }
        let avg = |f: fn(&crate::sys::CpuUsage) -> f64| {
            lastsec
                .iter()
                .filter_map(|r| r.cpus.get(cpu).map(f))
                .sum::<f64>()
                / lastsec.len().max(1) as f64
        };
        let (busy, iow) = (avg(|c| c.busy_pct), avg(|c| c.iowait_pct));
        // Clamped: a replayed recording is range-checked, but a bar never
        // trusts its input to size an allocation.
        let (busy, iow) = (busy.clamp(0.0, 100.0), iow.clamp(0.0, 100.0));
        let b = ((busy / 100.0 * bar_w as f64).round() as usize).min(bar_w);
        let w = ((iow / 100.0 * bar_w as f64).round() as usize).min(bar_w - b.min(bar_w));
        buf.set_string(inner.x, y, format!("cpu{cpu:<2}"), th.text());
        buf.set_string(inner.x + 6, y, "█".repeat(b), Style::default().fg(th.busy));
        buf.set_string(
            inner.x + 6 + b as u16,
            y,
            "▒".repeat(w),
            Style::default().fg(th.iowait),
        );
        buf.set_string(
            inner.x + 6 + bar_w as u16,
            y,
            format!("{busy:>4.0}%{iow:>4.0}%"),
            th.dim(),
        );
        y += 1;
    }
}

/// Change from `a` to `b` in %, `None` when `a` is 0.
pub fn change_pct(a: f64, b: f64) -> Option<f64> {
    (a != 0.0).then(|| (b - a) / a * 100.0)
}

fn render_baseline(app: &App, th: &Theme, area: Rect, buf: &mut Buffer) {
    let block = panel("baseline vs now", th);
    let inner = block.inner(area);
    block.render(area, buf);
    let Some(base) = &app.baseline else {
        Paragraph::new(vec![
            Line::from(Span::styled("no baseline yet", th.dim())),
            Line::from(vec![
                Span::styled("press ", th.dim()),
                Span::styled("b", th.title()),
                Span::styled(" to mark the current window,", th.dim()),
            ]),
            Line::from(Span::styled("then change a setting and compare", th.dim())),
        ])
        .render(inner, buf);
        return;
    };
    let now = app.now;
    type Get = fn(&WindowStats) -> f64;
    /// Name, value, format, higher is better.
    type Row = (&'static str, Get, fn(f64) -> String, bool);
    let rows: [Row; 7] = [
        ("MiB/s", |s| s.throughput_mib_s, fmt_rate, true),
        ("IOPS", |s| s.iops, fmt_count, true),
        ("p50", |s| s.p50_us, fmt_us, false),
        ("p99", |s| s.p99_us, fmt_us, false),
        ("p99.9", |s| s.p999_us, fmt_us, false),
        ("queue p99", |s| s.queue_p99_us, fmt_us, false),
        ("run_delay/s", |s| s.run_delay_us_per_s, fmt_us, false),
    ];
    let mut lines = vec![Line::from(Span::styled(
        format!("{:<11}{:>9}{:>9}{:>9}", "", "baseline", "now", "change"),
        th.dim(),
    ))];
    for (name, get, fmt, higher_better) in rows {
        let b = get(&base.stats);
        let n = now.as_ref().map(get);
        let (chg, color) = match n.and_then(|n| change_pct(b, n)) {
            Some(c) => {
                let better = if higher_better { c > 0.0 } else { c < 0.0 };
                let color = if c.abs() < 2.0 {
                    th.text
                } else if better {
                    th.good
                } else {
                    th.bad
                };
                (format!("{c:+.0}%"), color)
            }
            None => ("-".into(), th.dim),
        };
        lines.push(Line::from(vec![
            Span::styled(format!("{name:<11}"), th.text()),
            Span::styled(format!("{:>9}", fmt(b)), Style::default().fg(th.baseline)),
            Span::styled(format!("{:>9}", n.map_or("-".into(), fmt)), th.text()),
            Span::styled(format!("{chg:>9}"), Style::default().fg(color)),
        ]));
    }
    if let Some(n) = &now {
        lines.push(Line::from(Span::styled(
            format!(
                "baseline {:.0}s: {}; now {:.0}s",
                base.stats.secs, base.label, n.secs
            ),
            th.dim(),
        )));
    }
    Paragraph::new(lines)
        .wrap(Wrap { trim: false })
        .render(inner, buf);
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

fn error_popup(text: &str, area: Rect, buf: &mut Buffer, th: &Theme) {
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

fn prompt(title: &str, lines: Vec<Line>, area: Rect, buf: &mut Buffer, th: &Theme) {
    let w = area.width.saturating_sub(4).min(90);
    let r = popup(area, w, lines.len() as u16 + 2, buf);
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

fn picker(
    items: &[super::app::PickItem],
    selected: usize,
    area: Rect,
    buf: &mut Buffer,
    th: &Theme,
) {
    let w = area.width.saturating_sub(4).min(110);
    let h = (items.len() as u16 + 8).min(area.height.saturating_sub(2));
    let r = popup(area, w, h, buf);
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(th.border())
        .title(Span::styled(
            " presets: ↑↓ choose, Enter applies, any other key closes ",
            th.title(),
        ));
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
                '✓' => "y",
                '✗' => "n",
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
