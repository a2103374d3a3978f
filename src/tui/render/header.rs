//! The header line: running or paused, elapsed time, what the kernel and CPU
//! offer, the plan, the explorer's own cost, failures.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;

use super::look::*;
use crate::tui::app::App;
use crate::tui::theme::Theme;

pub(crate) fn render_header(app: &App, th: &Theme, area: Rect, buf: &mut Buffer) {
    let left = Line::from(left_spans(app, th));
    let used = left.width() as u16;
    left.render(area, buf);
    render_right(app, th, area, used, buf);
}

/// The left part: state and time, where it runs, failures, the machine's features, the plan.
fn left_spans(app: &App, th: &Theme) -> Vec<Span<'static>> {
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
    // A remote workload: where, and loudly when its connection was lost
    // (the charts keep what arrived).
    if let Some(place) = &app.place {
        spans.push(Span::styled(place.clone(), th.title()));
        spans.push(Span::styled(" │ ", th.dim()));
    }
    if let Some(why) = &app.lost {
        spans.push(Span::styled(
            format!("✗ connection lost: {why}"),
            Style::default().fg(th.bad).add_modifier(Modifier::BOLD),
        ));
        spans.push(Span::styled(" │ ", th.dim()));
    }
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
    if let Some(pods) = &app.pods {
        spans.push(Span::styled(" · ", th.dim()));
        spans.push(Span::styled(pods.clone(), th.text()));
    }
    spans
}

/// Right-aligned where they do not cover the `used` columns of the plan: what could read iowait (where nothing does, sleep = iowait vs plain can change only accounting here, not speed), then the UI's own cost.
fn render_right(app: &App, th: &Theme, area: Rect, used: u16, buf: &mut Buffer) {
    let idle: Vec<Span> = match &app.idle {
        Some((text, read)) => vec![
            Span::styled(format!(" │ {text} "), th.dim()),
            Span::styled("iowait", th.dim()),
            if *read {
                Span::styled("✓", Style::default().fg(th.good))
            } else {
                Span::styled("✗", Style::default().fg(th.warn))
            },
        ],
        None => Vec::new(),
    };
    let ui = format!(
        " │ ui {:.1}% cpu {:.1}ms/frame ≤{:.0}Hz",
        app.ui.cpu_pct, app.ui.frame_ms, app.ui.fps
    );
    let short = format!(" │ ui {:.1}% {:.1}ms", app.ui.cpu_pct, app.ui.frame_ms);
    let with = |ui: Option<&String>| {
        let mut v = idle.clone();
        if let Some(u) = ui {
            v.push(Span::styled(u.clone(), th.dim()));
        }
        Line::from(v)
    };
    let options = [
        with(Some(&ui)),
        with(Some(&short)),
        with(None),
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
