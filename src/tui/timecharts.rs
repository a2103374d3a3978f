//! The three time charts (latency on a log axis, throughput, scheduler latency)
//! with their change markers, drawn by the main screen and by presentation mode
//! alike. The latency chart is on top in both, so it carries the markers'
//! numbers; the charts under it share its time axis.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::Widget;

use crate::metrics::IntervalRecord;
use crate::output::format::{fmt_count, fmt_rate, fmt_us};
use crate::tui::app::App;
use crate::tui::chart::{Scale, Series, TimeChart};
use crate::tui::look::*;

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
            .history
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
    let (t0, t1, whole) = app.chart_span();
    TimeChart {
        title,
        series,
        t0,
        t1,
        from_start: whole,
        scale,
        fmt_left,
        fmt_right,
        markers: &app.markers,
        strip: false,
        dots: look.dots(),
        theme: &look.theme,
    }
}

pub(crate) fn latency_chart(app: &App, look: &Look, area: Rect, buf: &mut Buffer) {
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
    let chart = time_chart(app, look, title, series, Scale::Log, fmt_us, fmt_count);
    TimeChart {
        strip: true,
        ..chart
    }
    .render(area, buf);
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

pub(crate) fn sched_chart(app: &App, look: &Look, area: Rect, buf: &mut Buffer) {
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
