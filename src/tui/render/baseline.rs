//! The baseline-vs-now panel: each metric for the baseline and the window since
//! the last change, and the change in percent, green when better. "now" is
//! compared only once it holds a few seconds ("collecting..." until then);
//! a change inside either window's spread of intervals is marked `~` and
//! greyed: it is not a result; each window's length and interval count
//! are shown.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Widget, Wrap};

use super::look::*;
use crate::metrics::{METRICS, WindowSpread, WindowStats};
use crate::tui::app::{App, Baseline};
use crate::tui::theme::Theme;

/// Seconds the "now" window needs before it is compared with the
/// baseline (until then the panel says it is collecting).
pub const MIN_NOW_S: f64 = 3.0;

/// Change from `a` to `b` in %, `None` when `a` is 0.
pub fn change_pct(a: f64, b: f64) -> Option<f64> {
    (a != 0.0).then(|| (b - a) / a * 100.0)
}

pub(crate) fn render_baseline(app: &App, th: &Theme, area: Rect, buf: &mut Buffer) {
    let block = panel("baseline vs now", th);
    let inner = block.inner(area);
    block.render(area, buf);
    let Some(base) = &app.baseline else {
        no_baseline(th, inner, buf);
        return;
    };
    // Until "now" holds enough intervals it is not a figure to compare.
    let now = app.now;
    let now_spread = WindowSpread::of(app.now_records());
    let collecting = now.as_ref().is_none_or(|n| n.secs < MIN_NOW_S);
    // Columns narrow where the panel is (120x40): never wrapped under a row.
    let narrow = inner.width < 38;
    let (mut lines, noisy) = metric_rows(base, now.as_ref(), &now_spread, collecting, narrow, th);
    let now_s = now.as_ref().map_or(0.0, |n| n.secs);
    lines.push(Line::from(Span::styled(
        if collecting {
            format!("collecting… now {now_s:.1} s of {MIN_NOW_S:.0} s")
        } else {
            format!(
                "baseline {:.0} s ({} int.), now {now_s:.0} s ({} int.){}",
                base.stats.secs,
                base.spread.intervals,
                now_spread.intervals,
                if noisy { "; ~ inside the spread" } else { "" }
            )
        },
        th.dim(),
    )));
    lines.push(settings_line(base, app, th));
    // The preset's published result against this run: computed.
    if let Some((kind, line, how)) = app.demo_verdict() {
        use crate::output::verdict::Kind;
        let style = match kind {
            Kind::Reproduced => Style::default().fg(th.good),
            Kind::NotReproduced => Style::default().fg(th.bad),
            _ => th.text(),
        };
        lines.push(Line::from(vec![
            Span::styled(line, style),
            Span::styled(format!(" {how}"), th.dim()),
        ]));
    }
    Paragraph::new(lines)
        .wrap(Wrap { trim: false })
        .render(inner, buf);
}

/// The panel before a baseline is marked: how to mark one.
fn no_baseline(th: &Theme, inner: Rect, buf: &mut Buffer) {
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
}

/// The header and one row per explorer metric (baseline, now, change); and whether a change is inside the noise.
fn metric_rows(
    base: &Baseline,
    now: Option<&WindowStats>,
    now_spread: &WindowSpread,
    collecting: bool,
    narrow: bool,
    th: &Theme,
) -> (Vec<Line<'static>>, bool) {
    let (nw, cw) = if narrow { (8, 7) } else { (11, 9) };
    let mut lines = vec![Line::from(Span::styled(
        format!(
            "{:<nw$}{:>cw$}{:>cw$}{:>cw$}",
            "",
            if narrow { "base" } else { "baseline" },
            "now",
            "change"
        ),
        th.dim(),
    ))];
    let mut noisy = false;
    // The table's metrics the explorer shows, each with its own getter,
    // format, direction and spread.
    for m in METRICS.iter().filter(|m| m.explorer) {
        let b = (m.window)(&base.stats);
        let n = now.filter(|_| !collecting).map(m.window);
        let (chg, color) = match n.and_then(|n| change_pct(b, n)) {
            Some(c) => {
                // Inside the noise: the new value within the baseline's
                // intervals, or the baseline's within the new ones'.
                let inside = base.spread.holds(m, n.unwrap_or(b)) || now_spread.holds(m, b);
                noisy |= inside;
                let better = m.better_by(c);
                let color = if inside || c.abs() < 2.0 {
                    th.dim
                } else if better {
                    th.good
                } else {
                    th.bad
                };
                (format!("{}{c:+.0}%", if inside { "~" } else { "" }), color)
            }
            None => ("-".into(), th.dim),
        };
        let shown = match n {
            Some(n) => m.show(n),
            None if collecting => "…".into(),
            None => "-".into(),
        };
        lines.push(Line::from(vec![
            Span::styled(
                format!("{:<nw$}", if narrow { m.narrow } else { m.short }),
                th.text(),
            ),
            Span::styled(
                format!("{:>cw$}", m.show(b)),
                Style::default().fg(th.baseline),
            ),
            Span::styled(format!("{shown:>cw$}"), th.text()),
            Span::styled(format!("{chg:>cw$}"), Style::default().fg(color)),
        ]));
    }
    (lines, noisy)
}

/// What differs from the baseline: one key is a comparison of it; more are named, since the change is then theirs together.
fn settings_line(base: &Baseline, app: &App, th: &Theme) -> Line<'static> {
    let changed = base.settings.diff(&app.settings);
    match changed.len() {
        0 => Line::from(Span::styled(
            format!("baseline: {} (same settings)", base.label),
            th.dim(),
        )),
        1 => Line::from(Span::styled(
            format!("vs baseline: {}", changed[0].label()),
            th.dim(),
        )),
        n => Line::from(Span::styled(
            format!(
                "{n} settings differ from the baseline: {}",
                changed
                    .iter()
                    .map(|c| c.key.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Style::default().fg(th.warn),
        )),
    }
}
