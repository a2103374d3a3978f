//! Where each part of the main screen lies for a terminal size: computed
//! once here and used both to draw ([`super::main_screen`]) and to read the
//! mouse ([`hit`]), so a click lands on the row, chart and time that are
//! drawn under it, whatever the size. Pure: an [`App`] and a [`Rect`] in,
//! rectangles out.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};

use super::chart;
use super::side::side_split;
use super::{MIN_HEIGHT, MIN_WIDTH};
use crate::tui::app::App;
use crate::tui::state::ChartKind;
use crate::tui::theme::{Theme, ThemeName};

/// The main screen's parts.
#[derive(Debug, Clone, PartialEq)]
pub struct MainLayout {
    /// The header line.
    pub header: Rect,
    /// The footer line.
    pub footer: Rect,
    /// The side column (settings over events), when there is room for one,
    /// and whether it is the wide form.
    pub side: Option<(Rect, bool)>,
    /// The settings panel (empty without a side column).
    pub settings: Rect,
    /// The events panel (empty without a side column or room for it).
    pub events: Rect,
    /// Each setting's row on screen: (y, setting), top to bottom.
    pub setting_rows: Vec<(u16, &'static str)>,
    /// The time charts drawn, top to bottom (none while the timeline
    /// shows).
    pub charts: Vec<(ChartKind, Rect)>,
    /// The timeline (`t`), in the charts' place.
    pub timeline: Option<Rect>,
    /// The baseline panel in the scheduler chart's place (no bottom row).
    pub baseline_inline: Option<Rect>,
    /// The bottom row's panels (distribution, stages, baseline), when it
    /// shows.
    pub bottom: Option<[Rect; 3]>,
}

/// Whether a chart carries the markers' number strip (the top one, latency).
pub fn strip(kind: ChartKind) -> bool {
    kind == ChartKind::Latency
}

/// The main screen's layout on `area`.
pub fn main_layout(app: &App, area: Rect) -> MainLayout {
    let [header, body, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(0),
        Constraint::Length(1),
    ])
    .areas(area);
    let side_w = if area.width >= 120 {
        40
    } else if area.width >= 80 {
        31
    } else {
        0
    };
    let [side, main] =
        Layout::horizontal([Constraint::Length(side_w), Constraint::Min(0)]).areas(body);
    // The bottom row appears once the charts have room above it.
    let bottom_h = if main.height >= 34 {
        main.height / 3
    } else {
        0
    };
    let (mut settings, mut events, mut setting_rows) = (Rect::default(), Rect::default(), vec![]);
    if side_w > 0 {
        // The rows do not depend on colours: any theme lays them out.
        let th = Theme::named(ThemeName::Dark);
        let (lines, top, bottom) = side_split(app, &th, side_w >= 40, side);
        settings = top;
        if bottom.height >= 3 {
            events = bottom;
        }
        let inner_h = top.height.saturating_sub(2) as usize;
        setting_rows = lines
            .iter()
            .take(inner_h)
            .enumerate()
            .filter_map(|(i, (_, k))| k.map(|k| (top.y + 1 + i as u16, k)))
            .collect();
    }
    let [charts_area, bottom] =
        Layout::vertical([Constraint::Min(0), Constraint::Length(bottom_h)]).areas(main);
    let timeline = app.lanes.is_open().then_some(charts_area);
    let inline = bottom_h == 0 && app.baseline.get().is_some() && timeline.is_none();
    let mut rows = vec![Constraint::Fill(4), Constraint::Fill(3)];
    rows.push(if inline {
        Constraint::Length(10)
    } else {
        Constraint::Fill(3)
    });
    let parts = Layout::vertical(rows).split(charts_area);
    let mut charts = vec![
        (ChartKind::Latency, parts[0]),
        (ChartKind::Throughput, parts[1]),
    ];
    if !inline {
        charts.push((ChartKind::Sched, parts[2]));
    }
    if timeline.is_some() {
        charts.clear();
    }
    MainLayout {
        header,
        footer,
        side: (side_w > 0).then_some((side, side_w >= 40)),
        settings,
        events,
        setting_rows,
        charts,
        timeline,
        baseline_inline: inline.then_some(parts[2]),
        bottom: (bottom_h > 0).then(|| {
            Layout::horizontal([
                Constraint::Fill(4),
                Constraint::Fill(4),
                Constraint::Fill(5),
            ])
            .areas(bottom)
        }),
    }
}

/// The bottom row's panels' help topics, left to right.
const BOTTOM_TOPICS: [&str; 3] = ["distribution", "stages", "baseline"];

/// The panels below or among the charts, each with its help topic: the
/// bottom row's three, or the baseline panel in the scheduler chart's
/// place.
fn topic_panels(l: &MainLayout) -> impl Iterator<Item = (Rect, &'static str)> + '_ {
    l.bottom
        .iter()
        .flat_map(|b| b.iter().copied().zip(BOTTOM_TOPICS))
        .chain(l.baseline_inline.map(|r| (r, "baseline")))
}

/// The panels Tab steps through on this screen, in order, each by its
/// help topic: the header, the settings panel (`settings`: the cursor goes
/// there), the charts (`axes`, one stop for the three), the bottom row's
/// panels or the baseline panel in the scheduler chart's place, the events
/// panel. Only what the screen shows.
pub fn focus_stops(l: &MainLayout) -> Vec<&'static str> {
    let mut out = vec!["header"];
    if !l.setting_rows.is_empty() {
        out.push("settings");
    }
    if !l.charts.is_empty() {
        out.push("axes");
    }
    out.extend(topic_panels(l).map(|(_, t)| t));
    if l.events.height > 0 {
        out.push("events");
    }
    out
}

/// Where the panel(s) of a focus topic lie (the charts for `axes`).
pub fn focus_rects(l: &MainLayout, topic: &str) -> Vec<Rect> {
    match topic {
        "header" => vec![l.header],
        "settings" => vec![l.settings],
        "events" => vec![l.events],
        "axes" => l.charts.iter().map(|c| c.1).collect(),
        _ => topic_panels(l)
            .filter(|(_, t)| *t == topic)
            .map(|(r, _)| r)
            .collect(),
    }
}

/// What a click at a cell is on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Hit {
    /// A setting's row in the settings panel.
    Setting(&'static str),
    /// The events panel.
    Events,
    /// A time chart's plot, at this time (seconds since the start) and
    /// column.
    Chart(ChartKind, f64),
    /// A time chart outside its plot (border, axes, legend).
    ChartFrame(ChartKind),
    /// A panel whose help topic is this (`header`, `stages`...): `?` then
    /// opens the help at it.
    Panel(&'static str),
    /// Anything else.
    Nothing,
}

/// The time window the charts draw: `[t0, t1]` seconds.
pub fn chart_span(app: &App) -> (f64, f64) {
    let (t0, t1, _) = app.window.chart_span();
    (t0, t1)
}

/// Whether `area` shows the main screen (not too small, not presentation
/// mode): only then do clicks mean rows and charts.
pub fn shows_main(app: &App, area: Rect) -> bool {
    !app.view.present() && area.width >= MIN_WIDTH && area.height >= MIN_HEIGHT
}

fn inside(r: Rect, x: u16, y: u16) -> bool {
    x >= r.x && x < r.x + r.width && y >= r.y && y < r.y + r.height
}

/// What the cell (`x`, `y`) of the main screen on `area` shows.
pub fn hit(app: &App, area: Rect, x: u16, y: u16) -> Hit {
    if !shows_main(app, area) {
        return Hit::Nothing;
    }
    let l = main_layout(app, area);
    if inside(l.header, x, y) {
        return Hit::Panel("header");
    }
    for (r, topic) in topic_panels(&l) {
        if inside(r, x, y) {
            return Hit::Panel(topic);
        }
    }
    if inside(l.settings, x, y) {
        return l
            .setting_rows
            .iter()
            .find(|(row, _)| *row == y)
            .map_or(Hit::Nothing, |(_, k)| Hit::Setting(k));
    }
    if inside(l.events, x, y) {
        return Hit::Events;
    }
    for &(kind, r) in &l.charts {
        if !inside(r, x, y) {
            continue;
        }
        let (t0, t1) = chart_span(app);
        return match chart::plot_rect(r, strip(kind)) {
            Some(p) if inside(p, x, y) => {
                Hit::Chart(kind, chart::time_of_col(t0, t1, p.width, x - p.x).0)
            }
            _ => Hit::ChartFrame(kind),
        };
    }
    Hit::Nothing
}

/// The oldest log line the events panel `events` may be scrolled back to
/// show at its bottom: the one above which it would not be full.
pub fn events_oldest(app: &App, events: Rect) -> u64 {
    let th = Theme::named(ThemeName::Dark);
    let width = events.width.saturating_sub(2) as usize;
    let n = events.height.saturating_sub(2) as usize;
    let mut rows = 0;
    for (i, (t, text, notice)) in app.log.lines().iter().enumerate() {
        rows += super::side::event_rows(*t, text, *notice, width, &th).len();
        if rows >= n {
            return app.log.dropped() + i as u64;
        }
    }
    app.log.newest()
}

/// The value chooser's popup for `items` values, with `selected`
/// highlighted: the popup, its list's rows, and the first value shown.
pub fn chooser_geometry(area: Rect, items: usize, selected: usize) -> (Rect, Rect, usize) {
    let w = area.width.saturating_sub(4).clamp(20, 84);
    // The list, a blank line, the setting's help and two lines of reason.
    let h = (items as u16 + 6).min(area.height.saturating_sub(2));
    let w = w.min(area.width);
    let r = Rect {
        x: area.x + (area.width - w) / 2,
        y: area.y + (area.height - h.min(area.height)) / 2,
        width: w,
        height: h.min(area.height),
    };
    let inner = ratatui::widgets::Block::default()
        .borders(ratatui::widgets::Borders::ALL)
        .inner(r);
    let list_h = (items as u16).min(inner.height.saturating_sub(4).max(1));
    let list = Rect {
        height: list_h.min(inner.height),
        ..inner
    };
    let first = selected.saturating_sub(list_h.saturating_sub(1) as usize);
    (r, list, first)
}

/// Where a click on an open chooser lands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChooserHit {
    /// Outside the popup: it closes.
    Outside,
    /// In the popup, on no value.
    Inside,
    /// On this value.
    Value(usize),
}

/// Which value of an open chooser the cell (`x`, `y`) is on.
pub fn chooser_hit(area: Rect, items: usize, selected: usize, x: u16, y: u16) -> ChooserHit {
    let (r, list, first) = chooser_geometry(area, items, selected);
    if !inside(r, x, y) {
        return ChooserHit::Outside;
    }
    if !inside(list, x, y) {
        return ChooserHit::Inside;
    }
    let i = first + (y - list.y) as usize;
    if i < items {
        ChooserHit::Value(i)
    } else {
        ChooserHit::Inside
    }
}

/// Draws a vertical cursor at time `t_s` on the plot of the chart in
/// `area`: a dotted line in the free cells, so the data stays in view.
pub fn draw_cursor(app: &App, kind: ChartKind, area: Rect, t_s: f64, th: &Theme, buf: &mut Buffer) {
    let Some(p) = chart::plot_rect(area, strip(kind)) else {
        return;
    };
    let (t0, t1) = chart_span(app);
    if t_s < t0 || t_s > t1 {
        return;
    }
    let x = p.x + chart::col_of(t0, t1, p.width, t_s);
    for y in p.y..p.y + p.height {
        let cell = &mut buf[(x, y)];
        if cell.symbol() == " " || cell.symbol() == "\u{2800}" {
            cell.set_symbol("┊");
            cell.set_fg(th.title);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tui::fixture::app;

    #[test]
    fn a_click_on_a_settings_row_names_its_setting() {
        let a = app(false);
        for (w, h) in [(80, 24), (120, 40), (160, 48)] {
            let area = Rect::new(0, 0, w, h);
            let l = main_layout(&a, area);
            assert!(!l.setting_rows.is_empty(), "{w}x{h}");
            for &(y, k) in &l.setting_rows {
                assert_eq!(
                    hit(&a, area, l.settings.x + 3, y),
                    Hit::Setting(k),
                    "{w}x{h}"
                );
            }
            // The border and a section header are no row.
            assert_eq!(hit(&a, area, l.settings.x + 3, l.settings.y), Hit::Nothing);
        }
        // 160x60 (every setting listed): the panel starts at row 1 (under
        // the header); its first line is the [workload] header, the second
        // workload.target.
        let area = Rect::new(0, 0, 160, 60);
        assert_eq!(hit(&a, area, 5, 2), Hit::Nothing);
        assert_eq!(hit(&a, area, 5, 3), Hit::Setting("workload.target"));
        assert_eq!(hit(&a, area, 5, 4), Hit::Setting("workload.engine"));
    }

    #[test]
    fn a_click_on_a_chart_maps_to_its_time_axis() {
        let a = app(false);
        let area = Rect::new(0, 0, 160, 48);
        let l = main_layout(&a, area);
        let kinds: Vec<ChartKind> = l.charts.iter().map(|c| c.0).collect();
        assert_eq!(
            kinds,
            [ChartKind::Latency, ChartKind::Throughput, ChartKind::Sched]
        );
        let (kind, r) = l.charts[0];
        let p = chart::plot_rect(r, strip(kind)).unwrap();
        let (t0, t1) = chart_span(&a);
        // The plot's first column is the window's start, its last now.
        let Hit::Chart(k, t) = hit(&a, area, p.x, p.y + 1) else {
            panic!()
        };
        assert_eq!(k, ChartKind::Latency);
        assert!(
            t >= t0 && t - t0 < (t1 - t0) / p.width as f64,
            "{t} vs {t0}"
        );
        let Hit::Chart(_, t) = hit(&a, area, p.x + p.width - 1, p.y + 1) else {
            panic!()
        };
        assert!(
            t <= t1 && t1 - t < (t1 - t0) / p.width as f64,
            "{t} vs {t1}"
        );
        // The middle column is the middle of the window, and the cursor is
        // drawn back in the column clicked.
        let x = p.x + p.width / 2;
        let Hit::Chart(_, t) = hit(&a, area, x, p.y + 1) else {
            panic!()
        };
        assert_eq!(p.x + chart::col_of(t0, t1, p.width, t), x);
        // The gutter with the ticks is the chart, not a time.
        assert_eq!(
            hit(&a, area, p.x - 2, p.y + 1),
            Hit::ChartFrame(ChartKind::Latency)
        );
        // A click on the throughput chart's right axis is no time either.
        let (_, r) = l.charts[1];
        let p = chart::plot_rect(r, true).unwrap();
        assert_eq!(
            hit(&a, area, p.x + p.width + 1, p.y),
            Hit::ChartFrame(ChartKind::Throughput)
        );
        // In presentation mode clicks mean nothing.
        let mut b = app(false);
        b.view.set_present(true);
        assert_eq!(hit(&b, area, x, p.y + 1), Hit::Nothing);
    }

    #[test]
    fn the_events_panel_and_the_chooser_are_hit() {
        let a = app(false);
        let area = Rect::new(0, 0, 80, 24);
        let l = main_layout(&a, area);
        assert!(l.events.height >= 3, "{l:?}");
        assert_eq!(hit(&a, area, l.events.x + 2, l.events.y + 1), Hit::Events);
        // A chooser of four values at 80x24.
        let (r, list, first) = chooser_geometry(area, 4, 2);
        assert_eq!(first, 0);
        assert_eq!(
            chooser_hit(area, 4, 2, list.x + 1, list.y + 3),
            ChooserHit::Value(3)
        );
        assert_eq!(
            chooser_hit(area, 4, 2, list.x + 1, list.y + 4),
            ChooserHit::Inside
        );
        assert_eq!(chooser_hit(area, 4, 2, r.x, r.y), ChooserHit::Inside);
        assert_eq!(chooser_hit(area, 4, 2, 0, 0), ChooserHit::Outside);
        // Twenty values in a low terminal: the list scrolls to the selected.
        let small = Rect::new(0, 0, 60, 18);
        let (_, list, first) = chooser_geometry(small, 20, 19);
        assert_eq!(first + list.height as usize - 1, 19);
        assert_eq!(
            chooser_hit(small, 20, 19, list.x, list.y + list.height - 1),
            ChooserHit::Value(19)
        );
    }
}
