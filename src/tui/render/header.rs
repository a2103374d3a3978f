//! The header line: running or paused, elapsed time, the target (always
//! named), what the kernel and CPU offer, the plan, the explorer's own
//! cost, failures.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;

use super::look::*;
use crate::tui::app::App;
use crate::tui::theme::Theme;

pub(crate) fn render_header(app: &App, th: &Theme, area: Rect, buf: &mut Buffer) {
    // Whole fields by priority: running or paused and the time, then the
    // target (where it runs), failures, the plan, the target's detail,
    // the capabilities and the pods; what the machine does with iowait
    // and the UI's cost take only what is left at the right.
    // The plan in full, or where it would be dropped (80 columns beside
    // a remote target's name), in its short form.
    let plan = app.running.plan().to_string();
    let mut spans = fit(left_fields(app, th, plan.clone()), area.width as usize);
    if !spans.iter().any(|s| s.content == plan) {
        spans = fit(
            left_fields(app, th, app.running.plan_short()),
            area.width as usize,
        );
    }
    let left = Line::from(spans);
    let used = left.width() as u16;
    left.render(area, buf);
    render_right(app, th, area, used, buf);
}

/// Whole fields only, in at most `width` columns: the fields of lowest
/// priority (highest number) are dropped first, never cut; what is left
/// keeps its order.
fn fit(mut fields: Vec<(u8, Vec<Span<'static>>)>, width: usize) -> Vec<Span<'static>> {
    let w = |f: &[(u8, Vec<Span<'static>>)]| -> usize {
        f.iter()
            .flat_map(|(_, s)| s)
            .map(|s| s.content.chars().count())
            .sum()
    };
    while w(&fields) > width {
        let Some(i) = fields
            .iter()
            .enumerate()
            .filter(|(_, (p, _))| *p > 0)
            .max_by_key(|(i, (p, _))| (*p, *i))
            .map(|(i, _)| i)
        else {
            break;
        };
        fields.remove(i);
    }
    fields.into_iter().flat_map(|(_, s)| s).collect()
}

/// The left part, as fields with their priority (0: always; higher ones
/// go first when the width runs out): state and time, where it runs,
/// failures, the plan, the machine's capabilities.
fn left_fields(app: &App, th: &Theme, plan: String) -> Vec<(u8, Vec<Span<'static>>)> {
    let f = app.running.features();
    let t = app.window.elapsed_s() as u64;
    let what = app.running.replay().unwrap_or("running");
    let state = if app.view.paused() {
        let text = match app.running.replay() {
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
    let sep = || Span::styled(" │ ", th.dim());
    let mut fields = vec![(
        0,
        vec![
            Span::styled("readpath", th.title()),
            state,
            Span::styled(
                format!("{:02}:{:02}:{:02}", t / 3600, t / 60 % 60, t % 60),
                th.text(),
            ),
        ],
    )];
    // The target, always: this host, or the remote one by name (its
    // detail, the kernel and the emulation, goes before the plan does);
    // loudly when its connection was lost (the charts keep what arrived).
    // (A replay names its recording in the state instead.)
    if app.running.replay().is_none() || app.running.place().is_some() {
        let name = app.running.place().map_or("this host", |p| p.name.as_str());
        fields.push((1, vec![sep(), Span::styled(name.to_string(), th.title())]));
        if let Some(p) = app.running.place() {
            if let Some(d) = &p.detail {
                fields.push((3, vec![Span::styled(format!(" {d}"), th.dim())]));
            }
            // How far behind its records arrive: the link's health, kept.
            for h in &p.health {
                fields.push((
                    1,
                    vec![Span::styled(
                        format!(" · {h}"),
                        Style::default().fg(th.warn),
                    )],
                ));
            }
        }
    }
    if let Some(why) = app.running.lost() {
        fields.push((
            1,
            vec![
                sep(),
                Span::styled(
                    format!("✗ connection lost: {why}"),
                    Style::default().fg(th.bad).add_modifier(Modifier::BOLD),
                ),
            ],
        ));
    }
    // Failed reads are never counted as good data; say so loudly.
    for (n, what) in [
        (app.window.verity_failures(), "verity failures"),
        (app.window.io_errors(), "I/O errors"),
    ] {
        if n > 0 {
            fields.push((
                1,
                vec![
                    sep(),
                    Span::styled(
                        format!("✗ {n} {what}"),
                        Style::default().fg(th.bad).add_modifier(Modifier::BOLD),
                    ),
                ],
            ));
        }
    }
    // What runs now: the plan (and the pods).
    fields.push((2, vec![sep(), Span::styled(plan, th.text())]));
    if let Some(pods) = app.running.pods() {
        fields.push((
            5,
            vec![
                Span::styled(" · ", th.dim()),
                Span::styled(pods.to_string(), th.text()),
            ],
        ));
    }
    // What the kernel and CPU can do (not settings: after `can`, dim, so
    // they do not read as state), one field.
    let mut can = vec![sep(), Span::styled("can", th.dim())];
    for (name, ok) in [
        ("io_uring", f.io_uring),
        ("NO_IOWAIT", f.no_iowait),
        ("AES", f.aes_instructions),
        ("SHA", f.sha_instructions),
        ("highpri", f.highpri),
    ] {
        can.extend([Span::raw(" "), Span::styled(name, th.dim()), mark(ok, th)]);
    }
    fields.push((4, can));
    fields
}

/// Right-aligned where they do not cover the `used` columns of the plan: what could read iowait (where nothing does, sleep = iowait vs plain can change only accounting here, not speed), then the UI's own cost.
fn render_right(app: &App, th: &Theme, area: Rect, used: u16, buf: &mut Buffer) {
    // In words a newcomer reads once: whether anything here reads iowait
    // (the idle and frequency drivers that decide it, where room is left).
    let idle: Vec<Span> = match app.running.idle() {
        Some((_, true)) => vec![Span::styled(" │ iowait read here", th.dim())],
        Some((_, false)) => vec![Span::styled(" │ iowait unused here", th.dim())],
        None => Vec::new(),
    };
    let idle_long: Vec<Span> = match app.running.idle() {
        Some((text, _)) => {
            let mut v = idle.clone();
            v.push(Span::styled(format!(" ({text})"), th.dim()));
            v
        }
        None => Vec::new(),
    };
    let cost = app.view.cost();
    let ui = format!(
        " │ ui {:.1}% cpu {:.1}ms/frame ≤{:.0}Hz",
        cost.cpu_pct, cost.frame_ms, cost.fps
    );
    let short = format!(" │ ui {:.1}% {:.1}ms", cost.cpu_pct, cost.frame_ms);
    let with = |idle: &Vec<Span<'static>>, ui: Option<&String>| {
        let mut v = idle.clone();
        if let Some(u) = ui {
            v.push(Span::styled(u.clone(), th.dim()));
        }
        Line::from(v)
    };
    let options = [
        with(&idle_long, Some(&ui)),
        with(&idle, Some(&ui)),
        with(&idle, Some(&short)),
        with(&idle, None),
        Line::from(Span::styled(ui.clone(), th.dim())),
        Line::from(Span::styled(short.clone(), th.dim())),
    ];
    for line in options {
        let w = line.width() as u16;
        if w > 0 && used + w <= area.width {
            let at = Rect::new(area.x + area.width - w, area.y, w, 1);
            line.render(at, buf);
            break;
        }
    }
}
