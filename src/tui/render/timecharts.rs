//! The three time charts (latency on a log axis, throughput, scheduler latency)
//! with their change markers, drawn by the main screen and by presentation mode
//! alike. The latency chart is on top in both, so it carries the markers'
//! numbers; the charts under it share its time axis.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Widget};

use super::chart::{Scale, Series, TimeChart};
use super::look::*;
use crate::metrics::IntervalRecord;
use crate::metrics::format::{fmt_count, fmt_rate, fmt_us};
use crate::metrics::table::{IOPS, P50, P99, P999, QUEUE_P99, RUN_DELAY, THROUGHPUT};
use crate::tui::app::App;

pub(crate) fn series(
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
            .window
            .history()
            .iter()
            .filter(|r| !r.paused)
            .filter_map(|r| f(r).map(|v| (r.t_s, v)))
            .collect(),
    }
}

pub(crate) fn time_chart<'a>(
    app: &'a App,
    look: &'a Look,
    title: Line<'a>,
    series: Vec<Series>,
    scale: Scale,
    fmt_left: super::chart::Fmt,
    fmt_right: super::chart::Fmt,
) -> TimeChart<'a> {
    let (t0, t1, whole) = app.window.chart_span();
    TimeChart {
        title,
        series,
        t0,
        t1,
        from_start: whole,
        scale,
        fmt_left,
        fmt_right,
        units: (None, None),
        markers: app.window.markers(),
        strip: false,
        bands: Vec::new(),
        dots: look.dots(),
        theme: &look.theme,
    }
}

/// The live A/B's turns along the latency chart's strip: the baseline's
/// side a half block in the baseline's colour, the current settings' a low
/// line in the text colour (`=` and `_` in ASCII), so the two read apart
/// without colour too.
pub(crate) fn ab_bands(app: &App, look: &Look) -> Vec<super::chart::Band> {
    let th = &look.theme;
    app.baseline
        .spans(app.window.elapsed_s())
        .into_iter()
        .map(|(from_s, to_s, side)| {
            let (glyph, color) = if side == 0 {
                ('▄', th.baseline)
            } else {
                ('▁', th.text)
            };
            super::chart::Band {
                from_s,
                to_s,
                color,
                glyph,
            }
        })
        .collect()
}

pub(crate) fn latency_chart(app: &App, look: &Look, area: Rect, buf: &mut Buffer) {
    let th = &look.theme;
    let s = th.series;
    let last = latest(app);
    let v = |f: fn(&IntervalRecord) -> f64| last.map_or("-".into(), |r| fmt_us(f(r)));
    // In presentation mode the big boxes hold a window's figures: the
    // legend says its values are the latest interval's.
    let title = legend(
        if app.view.present() {
            "latency (log), latest interval:"
        } else {
            "latency (log)"
        },
        vec![
            (format!("{} {}", P50.short, v(P50.interval)), s[0]),
            (format!("{} {}", P99.short, v(P99.interval)), s[1]),
            (format!("{} {}", P999.short, v(P999.interval)), s[2]),
        ],
        th,
    );
    let pos = |v: f64| (v > 0.0).then_some(v);
    let series = vec![
        series(app, P50.short, s[0], false, |r| pos((P50.interval)(r))),
        series(app, P99.short, s[1], false, |r| pos((P99.interval)(r))),
        series(app, P999.short, s[2], false, |r| pos((P999.interval)(r))),
    ];
    let chart = time_chart(app, look, title, series, Scale::Log, fmt_us, fmt_count);
    TimeChart {
        strip: true,
        bands: ab_bands(app, look),
        ..chart
    }
    .render(area, buf);
    // The last phase of a start: the workload runs, its first interval
    // is on its way (a second here, more from a slow target). Said, so
    // that empty charts do not read as a hang.
    if app.window.history().is_empty() && app.running.replay().is_none() && area.height > 4 {
        let from = app
            .running
            .place()
            .map_or("this host".to_string(), |p| p.name.clone());
        // Inside the plotting area (clear of the y axis' labels), never cut.
        let (left, room) = (area.x + 8, area.width.saturating_sub(10));
        let forms = [
            format!("waiting for the first interval from {from}…"),
            "waiting for the first interval…".to_string(),
            "waiting…".to_string(),
        ];
        let text = crate::tui::text::first_fitting(&forms, usize::from(room));
        let w = (text.chars().count() as u16).min(room);
        let at = Rect {
            x: left + (room - w) / 2,
            y: area.y + area.height / 2,
            width: w,
            height: 1,
        };
        Paragraph::new(Span::styled(text.to_string(), th.dim())).render(at, buf);
    }
}

pub(crate) fn throughput_chart(app: &App, look: &Look, area: Rect, buf: &mut Buffer) {
    let th = &look.theme;
    let s = th.series;
    let last = latest(app);
    let title = legend(
        "throughput",
        vec![
            (
                format!(
                    "{} {}",
                    THROUGHPUT.short,
                    last.map_or("-".into(), |r| fmt_rate((THROUGHPUT.interval)(r)))
                ),
                s[0],
            ),
            (
                format!(
                    "{} {} (right)",
                    IOPS.short,
                    last.map_or("-".into(), |r| fmt_count((IOPS.interval)(r)))
                ),
                s[3],
            ),
        ],
        th,
    );
    let series = vec![
        series(app, THROUGHPUT.short, s[0], false, |r| {
            Some((THROUGHPUT.interval)(r))
        }),
        series(app, IOPS.short, s[3], true, |r| Some((IOPS.interval)(r))),
    ];
    TimeChart {
        units: (Some(THROUGHPUT.unit.symbol()), Some(IOPS.unit.symbol())),
        ..time_chart(app, look, title, series, Scale::Linear, fmt_rate, fmt_count)
    }
    .render(area, buf);
}

pub(crate) fn sched_chart(app: &App, look: &Look, area: Rect, buf: &mut Buffer) {
    let th = &look.theme;
    let s = th.series;
    let last = latest(app);
    let rd = RUN_DELAY.interval;
    let title = legend(
        if app.view.present() {
            "scheduler, latest interval:"
        } else {
            "scheduler latency"
        },
        vec![
            (
                format!(
                    "{} {}",
                    QUEUE_P99.short,
                    last.map_or("-".into(), |r| fmt_us((QUEUE_P99.interval)(r)))
                ),
                s[1],
            ),
            (
                format!(
                    "run_delay {} {} (right)",
                    last.map_or("-".into(), |r| fmt_rate(rd(r))),
                    RUN_DELAY.unit.symbol()
                ),
                s[2],
            ),
        ],
        th,
    );
    let series = vec![
        series(app, QUEUE_P99.short, s[1], false, |r| {
            Some((QUEUE_P99.interval)(r))
        }),
        series(app, "run_delay", s[2], true, |r| Some(rd(r))),
    ];
    // Queue wait's ticks carry their unit (us, ms); run_delay's do not.
    TimeChart {
        units: (None, Some(RUN_DELAY.unit.symbol())),
        ..time_chart(app, look, title, series, Scale::Linear, fmt_us, fmt_rate)
    }
    .render(area, buf);
}

/// The interval a chart shows at time `t_s`: the one (not paused) that
/// holds it, else the nearest within `tol` seconds (a column's span).
pub(crate) fn record_at(app: &App, t_s: f64, tol: f64) -> Option<&IntervalRecord> {
    let live = || app.window.history().iter().filter(|r| !r.paused);
    live()
        .find(|r| r.t_s - r.interval_s < t_s && t_s <= r.t_s)
        .or_else(|| {
            live()
                .filter(|r| (r.t_s - t_s).abs() <= tol.max(r.interval_s))
                .min_by(|a, b| (a.t_s - t_s).abs().total_cmp(&(b.t_s - t_s).abs()))
        })
}

/// Microseconds exactly enough to read a chart by: `71.3 us`, `1.234 ms`.
fn exact_us(us: f64) -> String {
    if us < 1_000.0 {
        format!("{us:.1} us")
    } else {
        format!("{:.3} ms", us / 1e3)
    }
}

/// What a click on chart `kind` at `t_s` reads: a line with the interval's
/// time, then each series' value with its unit and colour, then the change
/// markers in that interval or in the column clicked (where their line is
/// drawn). `tol`: the time one plot column spans.
pub(crate) fn readout_lines(
    app: &App,
    kind: crate::tui::state::ChartKind,
    t_s: f64,
    tol: f64,
    th: &crate::tui::theme::Theme,
) -> Vec<(String, ratatui::style::Color)> {
    use crate::tui::state::ChartKind;
    let s = th.series;
    let Some(r) = record_at(app, t_s, tol) else {
        let text = if t_s < 0.0 {
            "before the start: nothing measured".to_string()
        } else {
            format!("{}: no interval measured here", fmt_t(t_s))
        };
        return vec![(text, th.dim)];
    };
    let from = r.t_s - r.interval_s;
    let mut out = vec![(
        format!(
            "{:.2}-{:.2} s ({} ago)",
            from,
            r.t_s,
            fmt_t((app.window.elapsed_s() - r.t_s).max(0.0))
        ),
        th.title,
    )];
    let at = |m: &crate::metrics::Metric| (m.interval)(r);
    let values: Vec<(String, ratatui::style::Color)> = match kind {
        ChartKind::Latency => vec![
            (format!("{:<6} {}", P50.short, exact_us(at(&P50))), s[0]),
            (format!("{:<6} {}", P99.short, exact_us(at(&P99))), s[1]),
            (format!("{:<6} {}", P999.short, exact_us(at(&P999))), s[2]),
        ],
        ChartKind::Throughput => vec![
            (
                format!("{:.2} {}", at(&THROUGHPUT), THROUGHPUT.unit.symbol()),
                s[0],
            ),
            (format!("{:.0} {}", at(&IOPS), IOPS.unit.symbol()), s[3]),
        ],
        ChartKind::Sched => vec![
            (
                format!("{}  {}", QUEUE_P99.short, exact_us(at(&QUEUE_P99))),
                s[1],
            ),
            (
                format!(
                    "run_delay  {:.2} {}",
                    at(&RUN_DELAY),
                    RUN_DELAY.unit.symbol()
                ),
                s[2],
            ),
        ],
    };
    out.extend(values.into_iter().map(|(t, c)| (format!("━ {t}"), c)));
    // The column a time is drawn in, as the chart's axis maps it.
    let (t0, _, _) = app.window.chart_span();
    let col = |t: f64| ((t - t0) / tol.max(1e-9)).floor() as i64;
    for m in app
        .window
        .markers()
        .iter()
        .filter(|m| (m.t_s > from - 1e-9 && m.t_s <= r.t_s + 1e-9) || col(m.t_s) == col(t_s))
    {
        out.push((format!("│ {}", m.label), th.marker));
    }
    out
}
