//! Time-series charts that stay honest on a terminal: a log axis for
//! latency (ratatui's `Chart` has none, so values are transformed and the
//! ticks labelled in us/ms/s), an optional right axis, min/max decimation
//! when samples outnumber columns (a stall survives; a mean would hide it),
//! and numbered vertical markers where a setting changed. The numbers sit in
//! a strip of their own above the plot (the events panel lists them with
//! what changed), so no label covers the data. Every chart keeps a right
//! gutter, used or not, so stacked charts share one time axis.
//!
//! ```text
//!  ┌title with legend and the latest values──────────────────────┐
//!  │           3                                                 │
//!  │ 10ms ┤          │                                      │ 4.0K │
//!  │  1ms ┤ ⣀⡠⠤⠒⠉⠉⠑⠢⣀│⣀⣀⣀⣀⣀⣀⣀⣀⣀⣀                      │ 2.0K │
//!  │100us ┤          │                                      │    0 │
//!  │      -60s                 -30s                        now       │
//!  └─────────────────────────────────────────────────────────────┘
//!   left gutter: ticks      plot (Canvas)             right gutter
//! ```

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Style};
use ratatui::symbols::Marker as Dots;
use ratatui::text::Line;
use ratatui::widgets::canvas::{Canvas, Line as Segment};
use ratatui::widgets::{Block, Borders, Widget};

use crate::tui::state::Marker;
use crate::tui::theme::Theme;

/// How the left axis maps values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    /// From 0 to a rounded-up maximum.
    Linear,
    /// Decades around the data (values <= 0 are not drawn).
    Log,
}

/// One line on a chart.
#[derive(Debug, Clone)]
pub struct Series {
    /// Legend name.
    pub name: &'static str,
    /// Colour.
    pub color: Color,
    /// (t_s, value) points, time ascending.
    pub points: Vec<(f64, f64)>,
    /// Drawn against the right axis (linear) instead of the left one.
    pub right: bool,
}

/// Formats a value for an axis tick.
pub type Fmt = fn(f64) -> String;

/// A span of time marked along a chart's strip: `glyph` in `color` in
/// every column from `from_s` to `to_s`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Band {
    /// Start, seconds.
    pub from_s: f64,
    /// End, seconds.
    pub to_s: f64,
    /// Its colour.
    pub color: ratatui::style::Color,
    /// Its character.
    pub glyph: char,
}

/// A time chart over `[t0, t1]`.
pub struct TimeChart<'a> {
    /// Title (legend and latest values).
    pub title: Line<'a>,
    /// The lines.
    pub series: Vec<Series>,
    /// Window start, seconds.
    pub t0: f64,
    /// Window end, seconds.
    pub t1: f64,
    /// The time axis is labelled in seconds from the start (a demo's whole
    /// length, ahead of now), not back from now.
    pub from_start: bool,
    /// Left axis mapping.
    pub scale: Scale,
    /// Left tick format.
    pub fmt_left: Fmt,
    /// Right tick format (when a series is on the right).
    pub fmt_right: Fmt,
    /// The axes' units where the tick labels do not carry one (`MiB/s`,
    /// `IOPS`, `ms/s`), written on the bottom border under each axis.
    pub units: (Option<&'static str>, Option<&'static str>),
    /// Change markers.
    pub markers: &'a [Marker],
    /// Draw the markers' numbers in a strip above the plot (the top chart
    /// of a stack; the ones under it share its time axis).
    pub strip: bool,
    /// Spans of time drawn along the strip, under the markers' numbers
    /// (the live A/B's turns).
    pub bands: Vec<Band>,
    /// Dot kind (Braille, or an ASCII character).
    pub dots: Dots,
    /// Colours.
    pub theme: &'a Theme,
}

/// Keeps at most two points per column (the min and the max, in the order
/// they happened) so a chart narrower than its data still shows every peak
/// and every dip. Points outside `[t0, t1]` are dropped.
pub fn decimate(points: &[(f64, f64)], t0: f64, t1: f64, cols: usize) -> Vec<(f64, f64)> {
    let visible = points.iter().filter(|p| p.0 >= t0 && p.0 <= t1);
    if cols == 0 || t1 <= t0 {
        return Vec::new();
    }
    let width = (t1 - t0) / cols as f64;
    let mut out = Vec::with_capacity(cols * 2);
    /// A column being filled: its index, lowest and highest point, count.
    type Col = (usize, (f64, f64), (f64, f64), usize);
    let mut cur: Option<Col> = None;
    let flush = |out: &mut Vec<(f64, f64)>, c: Col| {
        let (_, lo, hi, n) = c;
        if n == 1 || lo == hi {
            out.push(lo);
        } else if lo.0 <= hi.0 {
            out.extend([lo, hi]);
        } else {
            out.extend([hi, lo]);
        }
    };
    for &p in visible {
        let col = (((p.0 - t0) / width) as usize).min(cols - 1);
        match cur.as_mut() {
            Some(c) if c.0 == col => {
                if p.1 < c.1.1 {
                    c.1 = p;
                }
                if p.1 > c.2.1 {
                    c.2 = p;
                }
                c.3 += 1;
            }
            _ => {
                if let Some(c) = cur.take() {
                    flush(&mut out, c);
                }
                cur = Some((col, p, p, 1));
            }
        }
    }
    if let Some(c) = cur {
        flush(&mut out, c);
    }
    out
}

/// Decade bounds (log10) around the positive values, at least one decade.
pub fn log_bounds(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in values.filter(|v| *v > 0.0 && v.is_finite()) {
        lo = lo.min(v.log10());
        hi = hi.max(v.log10());
    }
    if !lo.is_finite() {
        return (1.0, 3.0);
    }
    let (lo, mut hi) = (lo.floor(), hi.ceil());
    if hi <= lo {
        hi = lo + 1.0;
    }
    (lo, hi)
}

/// A "nice" upper bound (1, 2, 2.5, 5 x 10^n) at or above `max` (1 for 0).
pub fn nice_max(max: f64) -> f64 {
    if max <= 0.0 || !max.is_finite() {
        return 1.0;
    }
    let mag = 10f64.powf(max.log10().floor());
    for m in [1.0, 2.0, 2.5, 5.0, 10.0] {
        if m * mag >= max * 1.0001 {
            return m * mag;
        }
    }
    10.0 * mag
}

const GUTTER: u16 = 6;

/// Where a chart drawn in `area` plots its points: inside the border,
/// right of the left axis' gutter, left of the right axis' (kept whether
/// or not a series uses it), below the markers' number strip (`strip`,
/// when there is room) and above the time axis. None when the chart is too
/// small to plot.
pub fn plot_rect(area: Rect, strip: bool) -> Option<Rect> {
    let inner = Block::default().borders(Borders::ALL).inner(area);
    // The right gutter is always reserved: charts stacked in one column
    // then share their time axis, and a marker lands at the same x on each.
    let right_w = GUTTER;
    let strip_h = u16::from(strip && inner.height >= 5);
    if inner.height < 3 + strip_h || inner.width < GUTTER + right_w + 10 {
        return None;
    }
    Some(Rect {
        x: inner.x + GUTTER,
        y: inner.y + strip_h,
        width: inner.width - GUTTER - right_w,
        height: inner.height - 1 - strip_h,
    })
}

/// The time axis of a plot `width` columns wide over `[t0, t1]`: the
/// column time `t` is drawn in (markers and the cursor use it).
pub fn col_of(t0: f64, t1: f64, width: u16, t: f64) -> u16 {
    let t1 = t1.max(t0 + 1e-3);
    (((t - t0) / (t1 - t0) * width as f64).max(0.0) as u16).min(width.saturating_sub(1))
}

/// The time at the middle of column `col` of a plot `width` columns wide
/// over `[t0, t1]` (the inverse of [`col_of`]), and the time one column
/// spans.
pub fn time_of_col(t0: f64, t1: f64, width: u16, col: u16) -> (f64, f64) {
    let t1 = t1.max(t0 + 1e-3);
    let per = (t1 - t0) / width.max(1) as f64;
    (t0 + (col as f64 + 0.5) * per, per)
}

/// The ASCII marks of a chart's series, in order (`--ascii`: a colour
/// alone cannot tell the series apart on a monochrome screen).
pub const ASCII_MARKS: [char; 6] = ['*', '+', 'o', 'x', '#', '%'];

/// The mark of the series of colour `color` among `series` (ASCII).
fn ascii_mark(series: &[Series], color: Color) -> Option<char> {
    series
        .iter()
        .position(|s| s.color == color)
        .map(|i| ASCII_MARKS[i % ASCII_MARKS.len()])
}

impl Widget for TimeChart<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let block = Block::default()
            .borders(Borders::ALL)
            .border_style(self.theme.border())
            .title(fit_spans(
                self.legend_title(),
                area.width.saturating_sub(2) as usize,
            ));
        let inner = block.inner(area);
        block.render(area, buf);
        let strip_h = u16::from(self.strip && inner.height >= 5);
        let Some(plot) = plot_rect(area, self.strip) else {
            return;
        };
        let (t0, t1) = (self.t0, self.t1.max(self.t0 + 1e-3));
        let (lo, hi, rmax) = self.bounds(t0, t1);
        let markers: Vec<&Marker> = self
            .markers
            .iter()
            .filter(|m| m.t_s >= t0 && m.t_s <= t1)
            .collect();
        self.paint(plot, buf, (t0, t1), (lo, hi, rmax), &markers);
        if strip_h > 0 {
            self.draw_bands(plot, inner.y, buf, (t0, t1));
            self.draw_numbers(plot, inner.y, buf, (t0, t1), &markers);
        }
        self.draw_ticks(inner, plot, buf, (lo, hi, rmax));
        self.draw_time_axis(inner, plot, buf);
        // Units on the bottom border, left under the left axis, right
        // under the right one, where the border has room for both.
        let y = area.y + area.height.saturating_sub(1);
        let (l, r) = self.units;
        let lw = l.map_or(0, |u| u.chars().count() as u16 + 2);
        let rw = r.map_or(0, |u| u.chars().count() as u16 + 2);
        if area.height >= 3 && lw + rw + 4 <= area.width {
            if let Some(u) = l {
                buf.set_string(area.x + 1, y, format!(" {u} "), self.theme.dim());
            }
            if let Some(u) = r.filter(|_| self.series.iter().any(|s| s.right)) {
                buf.set_string(
                    area.x + area.width - 1 - rw,
                    y,
                    format!(" {u} "),
                    self.theme.dim(),
                );
            }
        }
    }
}

impl TimeChart<'_> {
    /// The title, with each legend entry's line drawn as its series' own mark in ASCII.
    fn legend_title(&self) -> Line<'_> {
        // (Whole legend items only: see [`fit_spans`].)
        let mut title = self.title.clone();
        if self.dots != Dots::Braille {
            for span in &mut title.spans {
                if let (Some(fg), Some(rest)) = (span.style.fg, span.content.strip_prefix('━'))
                    && let Some(m) = ascii_mark(&self.series, fg)
                {
                    span.content = format!("{m}{rest}").into();
                }
            }
        }
        title
    }

    /// The left axis' bounds (lo, hi) and the right axis' maximum over `[t0, t1]`.
    fn bounds(&self, t0: f64, t1: f64) -> (f64, f64, f64) {
        fn visible(s: &Series, t0: f64, t1: f64) -> impl Iterator<Item = f64> + '_ {
            s.points
                .iter()
                .filter(move |p| p.0 >= t0 && p.0 <= t1)
                .map(|p| p.1)
        }
        let visible = |s| visible(s, t0, t1);
        // Left axis.
        let (lo, hi) = match self.scale {
            Scale::Log => log_bounds(self.series.iter().filter(|s| !s.right).flat_map(visible)),
            Scale::Linear => (
                0.0,
                nice_max(
                    self.series
                        .iter()
                        .filter(|s| !s.right)
                        .flat_map(visible)
                        .fold(0.0, f64::max),
                ),
            ),
        };
        let rmax = nice_max(
            self.series
                .iter()
                .filter(|s| s.right)
                .flat_map(visible)
                .fold(0.0, f64::max),
        );
        (lo, hi, rmax)
    }

    /// Paints the markers' lines and the series on the canvas (ASCII: as their marks).
    fn paint(
        &self,
        plot: Rect,
        buf: &mut Buffer,
        (t0, t1): (f64, f64),
        (lo, hi, rmax): (f64, f64, f64),
        markers: &[&Marker],
    ) {
        let to_y = |v: f64, right: bool| -> Option<f64> {
            if right {
                return Some(lo + v / rmax * (hi - lo));
            }
            match self.scale {
                Scale::Linear => Some(v),
                Scale::Log if v > 0.0 => Some(v.log10()),
                Scale::Log => None,
            }
        };
        // Dots per column: Braille has two across a cell.
        let cols = plot.width as usize * if self.dots == Dots::Braille { 2 } else { 1 };
        let lines: Vec<(Color, Vec<(f64, f64)>)> = self
            .series
            .iter()
            .map(|s| {
                let pts = s
                    .points
                    .iter()
                    .filter_map(|&(t, v)| to_y(v, s.right).map(|y| (t, y)))
                    .collect::<Vec<_>>();
                (s.color, decimate(&pts, t0, t1, cols))
            })
            .collect();
        let marker_color = self.theme.marker;
        Canvas::default()
            .marker(self.dots)
            .x_bounds([t0, t1])
            .y_bounds([lo, hi])
            .paint(|ctx| {
                for (color, pts) in &lines {
                    if pts.len() == 1 {
                        let (x, y) = pts[0];
                        ctx.draw(&Segment::new(x, y, x, y, *color));
                    }
                    for w in pts.windows(2) {
                        ctx.draw(&Segment::new(w[0].0, w[0].1, w[1].0, w[1].1, *color));
                    }
                    ctx.layer();
                }
                // Labels right of their line, stacked so neighbours do not overlap.
            })
            .render(plot, buf);
        // The change markers: a dashed line (`┆`, ASCII `|`) in the cells
        // the data leaves empty, never braille like the data, so on a
        // washed-out projector a marker cannot pass for a latency spike.
        let dash = if self.dots == Dots::Braille {
            "┆"
        } else {
            "|"
        };
        for m in markers {
            if m.t_s < t0 || m.t_s > t1 {
                continue;
            }
            let x = plot.x + col_of(t0, t1, plot.width, m.t_s);
            for y in plot.y..plot.y + plot.height {
                let cell = &mut buf[(x, y)];
                if matches!(cell.symbol(), " " | "⠀") {
                    cell.set_symbol(dash);
                    cell.set_fg(marker_color);
                }
            }
        }
        if self.dots != Dots::Braille {
            // Each series' dots as its own mark; change markers as `|`.
            for y in plot.y..plot.y + plot.height {
                for x in plot.x..plot.x + plot.width {
                    let cell = &mut buf[(x, y)];
                    if cell.symbol() != "*" {
                        continue;
                    }
                    if let Some(m) = ascii_mark(&self.series, cell.fg) {
                        cell.set_char(m);
                    }
                }
            }
        }
    }

    /// Draws the bands along the strip (row `y`) above the plot: a column
    /// takes the band its middle time falls in.
    fn draw_bands(&self, plot: Rect, y: u16, buf: &mut Buffer, (t0, t1): (f64, f64)) {
        if self.bands.is_empty() {
            return;
        }
        for col in 0..plot.width {
            let (mid, _) = time_of_col(t0, t1, plot.width, col);
            if let Some(b) = self.bands.iter().find(|b| mid >= b.from_s && mid < b.to_s) {
                buf.set_string(
                    plot.x + col,
                    y,
                    b.glyph.to_string(),
                    Style::default().fg(b.color),
                );
            }
        }
    }

    /// Writes the markers' numbers in the strip (row `y`) above the plot.
    fn draw_numbers(
        &self,
        plot: Rect,
        y: u16,
        buf: &mut Buffer,
        (t0, t1): (f64, f64),
        markers: &[&Marker],
    ) {
        let th = self.theme;
        let cols_of = |t: f64| col_of(t0, t1, plot.width, t);
        let marks: Vec<(u16, String, bool)> = markers
            .iter()
            .map(|m| (cols_of(m.t_s), m.n.to_string(), m.label == "baseline"))
            .collect();
        for (x, text, base) in place_numbers(&marks, plot.width) {
            let color = if base { th.baseline } else { th.marker };
            buf.set_string(
                plot.x + x,
                y,
                text,
                Style::default()
                    .fg(color)
                    .add_modifier(ratatui::style::Modifier::BOLD),
            );
        }
    }

    /// Writes the left axis' ticks in the left gutter and the right axis' in the right one.
    fn draw_ticks(
        &self,
        inner: Rect,
        plot: Rect,
        buf: &mut Buffer,
        (lo, hi, rmax): (f64, f64, f64),
    ) {
        let th = self.theme;
        let has_right = self.series.iter().any(|s| s.right);
        let row_of = |y: f64| -> u16 {
            let frac = ((y - lo) / (hi - lo)).clamp(0.0, 1.0);
            plot.y + ((1.0 - frac) * (plot.height - 1) as f64).round() as u16
        };
        let mut ticks: Vec<(f64, String, String)> = Vec::new(); // y, left, right
        match self.scale {
            Scale::Log => {
                let step = if hi - lo > plot.height as f64 {
                    2.0
                } else {
                    1.0
                };
                let mut d = lo;
                // Bounded: a non-finite or huge range draws no more ticks
                // than there are rows.
                while d <= hi + 1e-9 && ticks.len() <= plot.height as usize {
                    ticks.push((d, (self.fmt_left)(10f64.powf(d)), String::new()));
                    d += step;
                }
            }
            Scale::Linear => {
                for f in [0.0, 0.5, 1.0] {
                    ticks.push((lo + f * (hi - lo), (self.fmt_left)(f * hi), String::new()));
                }
            }
        }
        if has_right {
            if self.scale == Scale::Linear {
                for (t, f) in ticks.iter_mut().zip([0.0, 0.5, 1.0]) {
                    t.2 = (self.fmt_right)(f * rmax);
                }
            } else {
                for f in [0.0, 0.5, 1.0] {
                    ticks.push((
                        lo + f * (hi - lo),
                        String::new(),
                        (self.fmt_right)(f * rmax),
                    ));
                }
            }
        }
        let mut used = Vec::new();
        for (y, l, r) in ticks {
            let row = row_of(y);
            if used.contains(&(row, l.is_empty())) {
                continue;
            }
            used.push((row, l.is_empty()));
            if !l.is_empty() {
                let text = format!("{l:>w$}", w = (GUTTER - 1) as usize);
                buf.set_string(inner.x, row, &text, th.dim());
                buf.set_string(inner.x + GUTTER - 1, row, "┤", th.dim());
            }
            if !r.is_empty() {
                buf.set_string(plot.x + plot.width, row, "├", th.dim());
                buf.set_string(plot.x + plot.width + 1, row, &r, th.dim());
            }
        }
    }

    /// Writes the time axis under the plot, relative to the newest sample (or, over a demo's whole length, from its start).
    fn draw_time_axis(&self, inner: Rect, plot: Rect, buf: &mut Buffer) {
        let th = self.theme;
        let bottom = inner.y + inner.height - 1;
        let span = self.t1 - self.t0;
        let (left, mid, right) = if self.from_start {
            (
                fmt_secs(self.t0),
                fmt_secs(self.t0 + span / 2.0),
                fmt_secs(self.t1),
            )
        } else {
            (
                format!("-{}", fmt_secs(span)),
                format!("-{}", fmt_secs(span / 2.0)),
                "now".to_string(),
            )
        };
        buf.set_string(plot.x, bottom, &left, th.dim());
        buf.set_string(
            plot.x + plot.width / 2 - (mid.len() as u16) / 2,
            bottom,
            &mid,
            th.dim(),
        );
        buf.set_string(
            plot.x + plot.width.saturating_sub(right.len() as u16),
            bottom,
            &right,
            th.dim(),
        );
    }
}

/// Places marker numbers on one row without overlaps, newest first: each
/// at its line's column, or nudged left of the newer one beside it; one
/// that fits nowhere is left out (the events panel lists every marker).
/// `marks` are (column, number, is the baseline), oldest first; returns
/// (column, number, is the baseline).
pub fn place_numbers(marks: &[(u16, String, bool)], width: u16) -> Vec<(u16, String, bool)> {
    let mut out = Vec::new();
    // The first column the next (older) number may not reach.
    let mut limit = width;
    for (col, text, base) in marks.iter().rev() {
        let len = text.chars().count() as u16;
        let Some(room) = limit.checked_sub(len) else {
            continue;
        };
        let x = (*col).min(room);
        out.push((x, text.clone(), *base));
        // A space between two numbers.
        limit = x.saturating_sub(1);
        if x == 0 {
            break;
        }
    }
    out.reverse();
    out
}

/// Seconds as `30s`, `2m`, `1m30s` (the one way readpath writes a wait).
pub fn fmt_secs(s: f64) -> String {
    crate::output::format::human_secs(s)
}

/// `line` with whole spans only, in at most `width` columns: a title's
/// legend items (`━ run_delay 3.0 ms/s (right)`) are dropped from the
/// right rather than cut; the first (the chart's name) is kept, with an
/// ellipsis where even it does not fit.
pub(crate) fn fit_spans(line: Line<'_>, width: usize) -> Line<'_> {
    let mut used = 0;
    let mut spans = Vec::new();
    for (i, sp) in line.spans.into_iter().enumerate() {
        let w = sp.content.chars().count();
        if used + w > width {
            if i == 0 {
                let text = crate::tui::text::ellipsize(&sp.content, width);
                spans.push(ratatui::text::Span::styled(text, sp.style));
            }
            break;
        }
        used += w;
        spans.push(sp);
    }
    Line::from(spans)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimation_keeps_the_spike_and_the_dip() {
        let mut pts: Vec<(f64, f64)> = (0..1000).map(|i| (i as f64, 100.0)).collect();
        pts[500].1 = 50_000.0;
        pts[700].1 = 1.0;
        let d = decimate(&pts, 0.0, 1000.0, 10);
        assert!(d.len() <= 20, "{}", d.len());
        assert!(d.iter().any(|p| p.1 == 50_000.0), "spike lost: {d:?}");
        assert!(d.iter().any(|p| p.1 == 1.0), "dip lost: {d:?}");
        // Time order is kept.
        assert!(d.windows(2).all(|w| w[0].0 <= w[1].0));
    }

    #[test]
    fn decimation_passes_sparse_data_through() {
        let pts = [(1.0, 5.0), (2.0, 6.0), (3.0, 7.0)];
        assert_eq!(decimate(&pts, 0.0, 10.0, 100), pts.to_vec());
        assert_eq!(decimate(&pts, 2.5, 10.0, 100), vec![(3.0, 7.0)]);
    }

    #[test]
    fn numbers_never_overlap_and_stay_inside() {
        let m = |c: u16, n: &str| (c, n.to_string(), false);
        // 9 and 10 a column apart: 10 stays at its line, 9 moves left.
        let placed = place_numbers(&[m(3, "8"), m(10, "9"), m(11, "10"), m(99, "11")], 100);
        let at: Vec<(u16, &str)> = placed.iter().map(|p| (p.0, p.1.as_str())).collect();
        assert_eq!(at, [(3, "8"), (9, "9"), (11, "10"), (98, "11")]);
        for w in placed.windows(2) {
            assert!(w[0].0 + (w[0].1.len() as u16) < w[1].0, "{placed:?}");
        }
        // Crowded at the left edge: the oldest that fits nowhere is left out.
        let placed = place_numbers(&[m(0, "1"), m(0, "2"), m(1, "3")], 10);
        let at: Vec<(u16, &str)> = placed.iter().map(|p| (p.0, p.1.as_str())).collect();
        assert_eq!(at, [(1, "3")]);
    }

    #[test]
    fn log_bounds_cover_whole_decades() {
        assert_eq!(log_bounds([63.0, 270.0, 1_200.0].into_iter()), (1.0, 4.0));
        assert_eq!(log_bounds([100.0].into_iter()), (2.0, 3.0));
        assert_eq!(log_bounds([0.0, -1.0].into_iter()), (1.0, 3.0));
    }

    #[test]
    fn formats() {
        assert_eq!(nice_max(37.0), 50.0);
        assert_eq!(nice_max(0.0), 1.0);
        assert_eq!(fmt_secs(90.0), "1m30s");
    }
}
