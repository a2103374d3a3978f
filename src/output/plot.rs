//! Charts for slides from a recording: latency percentiles (log axis),
//! throughput, the verify/decrypt queue's wait and the workers' run_delay
//! over time, one unit per y axis, every marker (setting change, baseline,
//! demo caption) a number over the charts and listed with its text under
//! them, as an SVG (plotters' SVG backend: text stays text, no fonts
//! needed); and the same series as CSV for a spreadsheet or gnuplot.

use std::fmt::Write as _;

use std::ops::Range;

use plotters::coord::Shift;
use plotters::coord::ranged1d::ValueFormatter;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::metrics::{IntervalRecord, Unit, median};
// Each series' getter (run_delay in ms/s) comes from the metric table.
use crate::metrics::table;
use crate::output::recording::Recording;

/// One series' value in a record.
type Getter = fn(&IntervalRecord) -> f64;

/// One series: its name, colour and metric (the value in a record is
/// the metric's `interval` getter; its verdict on a change the metric's).
type Series = (&'static str, RGBColor, &'static table::Metric);

/// A chart panel.
struct Panel {
    /// Its name for `--metric`.
    metric: &'static str,
    /// Its title, without the unit (the unit is added in parentheses).
    title: &'static str,
    /// A log y axis.
    log: bool,
    /// Left out when every value in it is zero (nothing was measured: no
    /// workqueue, no workers), whether asked for or not.
    optional: bool,
    /// (name, colour, value per record).
    series: &'static [Series],
}

impl Panel {
    /// Its unit: its metrics' (one per panel; the table says it).
    fn unit(&self) -> Unit {
        self.series[0].2.unit
    }
}

const GREEN: RGBColor = RGBColor(0, 140, 60);
const ORANGE: RGBColor = RGBColor(220, 140, 0);
const RED_: RGBColor = RGBColor(210, 40, 40);
const BLUE_: RGBColor = RGBColor(40, 90, 200);
/// The markers' colour (lines and numbers).
const MARK: RGBColor = RGBColor(200, 0, 200);

// The queue wait (us) and the run_delay (ms per s) are two panels rather
// than one "scheduler latency" panel with a secondary axis (one y axis for
// two units): on a slide nobody in
// the room can tell which line belongs to which axis, and two scales on
// one plot invite reading meaning into where the lines cross. Stacked
// panels share the time axis, so the markers still line up across them,
// and each axis says one unit. At 1920x1080 four panels still leave each
// about 190 px of plotting height, enough for a trend and a step.
const PANELS: &[Panel] = &[
    Panel {
        metric: "latency",
        title: "read latency",
        log: true,
        optional: false,
        series: &[
            ("p50", GREEN, &table::P50),
            ("p99", ORANGE, &table::P99),
            ("p99.9", RED_, &table::P999),
        ],
    },
    Panel {
        metric: "throughput",
        title: "throughput",
        log: false,
        optional: false,
        series: &[("throughput", BLUE_, &table::THROUGHPUT)],
    },
    Panel {
        metric: "queue",
        title: "queue wait p99",
        log: false,
        optional: true,
        series: &[("queue wait p99", GREEN, &table::QUEUE_P99)],
    },
    Panel {
        metric: "run_delay",
        title: "run_delay",
        log: false,
        optional: true,
        series: &[("run_delay", ORANGE, &table::RUN_DELAY)],
    },
];

/// The names `--metric` takes: each panel's, in drawing order, and
/// `sched` for both scheduler panels (queue and run_delay).
pub const METRIC_NAMES: [&str; 5] = ["latency", "throughput", "queue", "run_delay", "sched"];

/// A `--metric` name that is no panel's: the name and those allowed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--metric {name:?}: allowed {}", METRIC_NAMES.join(", "))]
pub struct UnknownMetric {
    /// The name as written.
    pub name: String,
}

/// An error of the SVG backend's drawing (what [`svg`] and the heat map
/// draw on).
pub type DrawError = DrawingAreaErrorKind<std::io::Error>;

/// Why a recording's charts could not be drawn.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    /// No interval to draw.
    #[error("the recording holds no measured interval")]
    NoIntervals,
    /// None of the panels asked for was measured.
    #[error(
        "nothing to draw for --metric {}: the recording measured none of it (no workqueue workers)",
        metrics.join(",")
    )]
    NothingMeasured {
        /// The panels' metrics asked for.
        metrics: Vec<&'static str>,
    },
    /// The drawing itself failed.
    #[error("{0}")]
    Draw(#[from] DrawError),
}

/// The panels (indexes for [`svg`], in drawing order, each once) that
/// `--metric` names; an unknown name is an error naming it and the
/// allowed ones.
pub fn metric_panels(names: &[String]) -> Result<Vec<usize>, UnknownMetric> {
    let mut out = Vec::new();
    for name in names {
        let picked: Vec<usize> = match name.as_str() {
            "sched" => PANELS
                .iter()
                .enumerate()
                .filter(|(_, p)| p.optional)
                .map(|(i, _)| i)
                .collect(),
            n => match PANELS.iter().position(|p| p.metric == n) {
                Some(i) => vec![i],
                None => {
                    return Err(UnknownMetric { name: name.clone() });
                }
            },
        };
        out.extend(picked);
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// One CSV text field (RFC 4180): always quoted, a `"` doubled; control
/// characters (escape sequences, newlines) replaced by U+FFFD, so the file
/// is safe in a terminal (`cat`, `less -R`) as on stdout; and a field a
/// spreadsheet would run as a formula (starting with `=`, `+`, `-`, `@`)
/// gets a leading `'`, as OWASP advises for CSV from untrusted input. A
/// recording is a file from anywhere: its labels are text, never commands.
pub fn csv_field(s: &str) -> String {
    let mut text = crate::output::format::printable(s, false);
    if text.starts_with(['=', '+', '-', '@']) {
        text.insert(0, '\'');
    }
    format!("\"{}\"", text.replace('"', "\"\""))
}

/// The recording's series as CSV: one row per interval, LF line ends, the
/// events in one quoted field ([`csv_field`]).
pub fn csv(rec: &Recording) -> String {
    // The columns: the explorer's metrics of the table, by their JSON
    // names (run_delay_ms_per_s among them).
    let cols: Vec<&crate::metrics::Metric> = crate::metrics::METRICS
        .iter()
        .filter(|m| m.explorer)
        .collect();
    let mut out = String::from("t_s");
    for m in &cols {
        out.push(',');
        out.push_str(m.name);
    }
    out.push_str(",events\n");
    for r in rec.records.iter().filter(|r| !r.paused) {
        let events: Vec<&str> = r.events.iter().map(|e| e.label.as_str()).collect();
        let _ = write!(out, "{:.3}", r.t_s);
        for m in &cols {
            let v = (m.interval)(r);
            // IOPS to one decimal, the rest to three (as before).
            let _ = match m.unit {
                crate::metrics::Unit::Iops => write!(out, ",{v:.1}"),
                _ => write!(out, ",{v:.3}"),
            };
        }
        let _ = writeln!(out, ",{}", csv_field(&events.join("; ")));
    }
    out
}

/// The recording's settings phases: the times of its live setting
/// changes (`key: a -> b` events), which split it into stretches under the
/// same settings.
fn phase_starts(rec: &Recording) -> Vec<(f64, String)> {
    rec.records
        .iter()
        .flat_map(|r| r.events.iter())
        .filter(|e| {
            e.label.split_once(": ").is_some_and(|(k, rest)| {
                k.contains('.') && !k.contains(' ') && rest.contains(" -> ")
            })
        })
        .map(|e| (e.t_s, e.label.clone()))
        .collect()
}

/// A value with its unit, as a slide says it: times in s, ms or us
/// (`1.03 s`, `190 ms`, `84 us`), run_delay per second in ms/s, rates
/// plain.
pub(super) fn say(v: f64, unit: Unit) -> String {
    match unit {
        Unit::Us if v >= 1e6 => format!("{:.2} s", v / 1e6),
        Unit::Us if v >= 1e3 => format!("{:.1} ms", v / 1e3),
        Unit::Us => format!("{v:.0} us"),
        Unit::MsPerS if v >= 10.0 => format!("{v:.0} ms/s"),
        Unit::MsPerS => format!("{v:.2} ms/s"),
        Unit::Pct => format!("{v:.1}%"),
        u => format!("{v:.1} {}", u.symbol()),
    }
}

/// The one unit a time axis is labelled in, for values around `us`: its
/// name and how many us it is.
fn time_unit(us: f64) -> (&'static str, f64) {
    if us < 2e3 {
        ("us", 1.0)
    } else if us < 2e6 {
        ("ms", 1e3)
    } else {
        ("s", 1e6)
    }
}

/// A tick label: a plain number, three significant digits at most below
/// 100, no trailing zeros (`0.01`, `2.5`, `250`).
pub(super) fn fmt_tick(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return "0".into();
    }
    let a = v.abs();
    let decimals = if a >= 100.0 {
        0
    } else {
        (2.0 - a.log10().floor()).clamp(0.0, 6.0) as usize
    };
    let s = format!("{v:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// A text's width in pixels as drawn by a viewer, estimated (plotters
/// writes `font-size` as the style's size / 1.24; an average sans-serif
/// character is under 0.6 em wide).
pub(super) fn text_w(chars: usize, size: u32) -> i32 {
    (chars as f64 * 0.6 * f64::from(size) / 1.24).ceil() as i32
}

/// A marker on the charts: a setting change, a baseline, a cache drop or
/// a demo caption, numbered in time order.
struct Marker {
    t_s: f64,
    /// What the list under the charts says: the event, or the caption's text.
    text: String,
}

/// The recording's markers in time order (captions only with `captions`),
/// their text made printable (a recording is a file from anywhere).
fn markers(rec: &Recording, captions: bool) -> Vec<Marker> {
    let mut out: Vec<Marker> = rec
        .records
        .iter()
        .flat_map(|r| r.events.iter())
        .filter_map(|e| {
            let text = match e.label.strip_prefix("caption: ") {
                Some(_) if !captions => return None,
                Some(c) => c,
                None => e.label.as_str(),
            };
            Some(Marker {
                t_s: if e.t_s.is_finite() { e.t_s } else { 0.0 },
                text: crate::output::format::printable(text, false),
            })
        })
        .collect();
    out.sort_by(|a, b| a.t_s.total_cmp(&b.t_s));
    out
}

/// Rows of marker numbers at most, over a panel.
const MAX_ROWS: usize = 3;

/// Places labels `widths[i]` pixels wide, in order, each centred at
/// `centres[i]` when it can be, between `left` and `right`: a label that
/// would overlap the one before it is nudged right (at least `gap` pixels
/// after it); one that would then run past `right` goes to the next row
/// (up to [`MAX_ROWS`]; past those it is left off: `None`). Returns each
/// label's left edge and row.
fn place_labels(
    centres: &[i32],
    widths: &[i32],
    left: i32,
    right: i32,
    gap: i32,
) -> Vec<Option<(i32, usize)>> {
    let mut ends: Vec<i32> = Vec::new();
    centres
        .iter()
        .zip(widths)
        .map(|(&c, &w)| {
            let want = (c - w / 2).min(right - w).max(left);
            for (row, end) in ends.iter_mut().enumerate() {
                let x = want.max(*end + gap);
                if x + w <= right {
                    *end = x + w;
                    return Some((x, row));
                }
            }
            if ends.len() < MAX_ROWS {
                ends.push(want + w);
                Some((want, ends.len() - 1))
            } else {
                None
            }
        })
        .collect()
}

/// Breaks `text` at spaces into lines of at most `max` characters (a
/// longer word is cut).
pub(super) fn wrap(text: &str, max: usize) -> Vec<String> {
    let max = max.max(8);
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split(' ') {
        let mut word: Vec<char> = word.chars().collect();
        while word.len() > max {
            if !line.is_empty() {
                lines.push(std::mem::take(&mut line));
            }
            lines.push(word.drain(..max).collect());
        }
        let word: String = word.into_iter().collect();
        let len = line.chars().count();
        if len > 0 && len + 1 + word.chars().count() > max {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(&word);
    }
    if !line.is_empty() || lines.is_empty() {
        lines.push(line);
    }
    lines
}

/// How a picture is drawn: for a document (fonts scaled with the image,
/// 1200x900 as 1x) or for a slide (`plot --slide`: everything twice that,
/// so that the tick labels are about 2% of the image's height, read from
/// the back of a room, and more than two panels in two columns, so each
/// keeps the height of its trend).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Look {
    /// A demo's captions among the markers.
    pub captions: bool,
    /// For a slide.
    pub slide: bool,
}

impl Look {
    /// Text and lines on a slide, times a document's.
    pub const SLIDE_SCALE: f64 = 2.4;

    /// The columns of `panels` panels: two on a slide of more than two.
    fn columns(self, panels: usize) -> usize {
        if self.slide && panels > 2 { 2 } else { 1 }
    }
}

/// Draws the chosen panels (indexes as [`metric_panels`] returns them; all
/// when empty), each left out when it has nothing measured (the queue
/// wait and run_delay panels without workqueue workers), as an SVG
/// document of `width` x `height` pixels, fonts scaled to the size. Every
/// marker (setting change, baseline, cache drop and, with `look.captions`,
/// demo caption) is a number `[n]` in a strip over each panel's plotting
/// area, at its time, and is listed with its text under the charts. Each
/// settings phase's median is drawn as a dashed segment and the change from
/// the first phase to the last is written at the top right of the chart.
pub fn svg(
    rec: &Recording,
    width: u32,
    height: u32,
    metrics: &[usize],
    look: Look,
) -> Result<String, PlotError> {
    let records = measured_records(rec)?;
    let panels = chosen_panels(&records, metrics)?;
    let columns = look.columns(panels.len());
    let lay = Layout::new(rec, width, height, look, columns);
    let mut list = marker_list(&lay, width, height);
    if lay.slide && !lay.phases.is_empty() {
        // A slide's results are short: their key, once.
        list.push((
            false,
            "On each chart: the change from the first phase to the last (~: within noise)".into(),
        ));
    }
    let px = |n: f64| lay.px(n);

    let mut doc = String::new();
    {
        let root = SVGBackend::with_string(&mut doc, (width, height)).into_drawing_area();
        root.fill(&WHITE)?;
        let title = plot_title(rec);
        let title_h = px(32.0);
        let (top, rest) = root.split_vertically(title_h);
        top.titled(&title, ("sans-serif", px(22.0)))?;
        let list_h = if list.is_empty() {
            0
        } else {
            lay.line_h * list.len() as u32 + px(10.0)
        };
        let (rest, bottom) = rest.split_vertically(height.saturating_sub(title_h + list_h));
        draw_list(&bottom, &lay, &list)?;
        let areas = panel_areas(&rest, &panels, &lay, columns);
        for (area, last, panel) in areas.iter().zip(&panels).map(|((a, l), p)| (a, *l, p)) {
            draw_panel(area, panel, last, &lay, &records)?;
        }
        root.present()?;
    }
    Ok(doc)
}

/// The intervals drawn: those measured (not paused) and of about the usual
/// length; an error when there is none.
fn measured_records(rec: &Recording) -> Result<Vec<&IntervalRecord>, PlotError> {
    // A last (or first) partial interval is not a dip: only intervals of
    // about the usual length are drawn.
    let usual = median(
        rec.records
            .iter()
            .filter(|r| !r.paused)
            .map(|r| r.interval_s)
            .collect(),
    );
    let records: Vec<&IntervalRecord> = rec
        .records
        .iter()
        .filter(|r| !r.paused && (!usual.is_finite() || r.interval_s >= usual * 0.8))
        .collect();
    if records.is_empty() {
        return Err(PlotError::NoIntervals);
    }
    Ok(records)
}

/// The panels drawn: those asked for (indexes in `metrics`, all when
/// empty), less the optional ones with nothing measured in `records`; an
/// error naming them when none is left.
fn chosen_panels(
    records: &[&IntervalRecord],
    metrics: &[usize],
) -> Result<Vec<&'static Panel>, PlotError> {
    let measured = |p: &Panel| {
        !p.optional
            || records.iter().any(|r| {
                p.series.iter().any(|(_, _, m)| {
                    let v = (m.interval)(r);
                    v.is_finite() && v > 0.0
                })
            })
    };
    let asked: Vec<&Panel> = PANELS
        .iter()
        .enumerate()
        .filter(|(i, _)| metrics.is_empty() || metrics.contains(i))
        .map(|(_, p)| p)
        .collect();
    let panels: Vec<&Panel> = asked.iter().copied().filter(|p| measured(p)).collect();
    if panels.is_empty() {
        return Err(PlotError::NothingMeasured {
            metrics: asked.iter().map(|p| p.metric).collect(),
        });
    }
    Ok(panels)
}

/// The picture's title: the preset's name and, where the recording ran
/// only one side of the preset's A/B (its `[compare]` key never changed),
/// which side (`readpath: fsverity-bound-vs-unbound, one side: workers.mode
/// = unbound`), so a one-side run is not read as the comparison.
pub(super) fn plot_title(rec: &Recording) -> String {
    let Some(p) = &rec.header.preset else {
        return "readpath".to_string();
    };
    let name = crate::output::format::printable(p, false);
    let key = crate::scenario::preset::resolve(p)
        .ok()
        .and_then(|(preset, _)| preset.compare.map(|c| c.key));
    let side = key.and_then(|key| {
        let prefix = format!("{key}: ");
        let changed = rec
            .records
            .iter()
            .flat_map(|r| &r.events)
            .any(|e| e.label.starts_with(&prefix));
        let value = rec.header.settings.get(&key)?;
        (!changed).then(|| format!("{key} = {value}"))
    });
    match side {
        Some(side) => format!("readpath: {name}, one side: {side}"),
        None => format!("readpath: {name}"),
    }
}

/// What every panel shares: the scale of fonts and margins, the time axis,
/// the settings phases, the markers, where the plotting areas lie across
/// and the strip of marker numbers over each, and the list's fonts.
struct Layout {
    /// Fonts and margins grow with the image (1200x900 is 1x; a slide
    /// twice and more).
    k: f64,
    /// Drawn for a slide: the results in one row where they fit.
    slide: bool,
    /// A plotting area's width, pixels.
    plot_w: i32,
    /// The time axis, seconds.
    t0: f64,
    t1: f64,
    /// The settings phases (their starts).
    phases: Vec<(f64, String)>,
    /// The markers, in time order.
    marks: Vec<Marker>,
    /// A chart's margin left and right.
    margin: u32,
    /// The y axis' label area's width.
    y_lab: u32,
    /// The marker numbers (`[n]`), their font and widths, their markers'
    /// x, and their places in the strip (left edge, row).
    numbers: Vec<String>,
    num_font: u32,
    widths: Vec<i32>,
    centres: Vec<i32>,
    placed: Vec<Option<(i32, usize)>>,
    /// A row of marker numbers' height, and the strip's.
    row_h: u32,
    strip_h: u32,
    /// The list under the charts: its font, line height, left edge and
    /// the indent of a wrapped line.
    list_font: u32,
    line_h: u32,
    list_x: i32,
    indent: i32,
}

impl Layout {
    /// The layout of a `width` x `height` image of `rec` drawn as `look`
    /// says, its panels in `columns` columns.
    fn new(rec: &Recording, width: u32, height: u32, look: Look, columns: usize) -> Layout {
        let scale = if look.slide { Look::SLIDE_SCALE } else { 1.0 };
        let k = ((f64::from(width) / 1200.0).min(f64::from(height) / 900.0) * scale)
            .clamp(0.9, 4.0 * scale);
        let captions_on = look.captions;
        let px = |n: f64| (n * k).round().max(1.0) as u32;
        let phases = phase_starts(rec);
        let t0 = rec.records.first().map_or(0.0, |r| r.t_s - r.interval_s);
        let t1 = rec.records.last().map_or(1.0, |r| r.t_s).max(t0 + 1e-3);
        let (t0, t1) = if t0.is_finite() && t1.is_finite() {
            (t0, t1)
        } else {
            (0.0, 1.0)
        };
        let marks = markers(rec, captions_on);
        let list_font = px(13.0);

        // Where each panel's plotting area lies across (all panels alike), and
        // the marker numbers' places in the strip over it.
        let margin = px(8.0);
        let y_lab = px(66.0);
        let plot_x0 = (margin + y_lab) as i32;
        // A column's width (the panels of one column are alike).
        let col_w = width / columns.max(1) as u32;
        let plot_x1 = (col_w as i32 - margin as i32).max(plot_x0 + 1);
        let to_x = |t: f64| {
            plot_x0
                + ((t.clamp(t0, t1) - t0) / (t1 - t0) * f64::from(plot_x1 - plot_x0)).round() as i32
        };
        let num_font = px(13.0);
        let numbers: Vec<String> = (1..=marks.len()).map(|n| format!("[{n}]")).collect();
        let widths: Vec<i32> = numbers.iter().map(|s| text_w(s.len(), num_font)).collect();
        let centres: Vec<i32> = marks.iter().map(|m| to_x(m.t_s)).collect();
        let placed = place_labels(&centres, &widths, plot_x0, plot_x1, px(5.0) as i32);
        let rows = placed.iter().flatten().map(|p| p.1 + 1).max().unwrap_or(0) as u32;
        let row_h = px(16.0);
        let strip_h = rows * row_h + px(4.0);
        Layout {
            k,
            slide: look.slide,
            plot_w: plot_x1 - plot_x0,
            t0,
            t1,
            phases,
            marks,
            margin,
            y_lab,
            numbers,
            num_font,
            widths,
            centres,
            placed,
            row_h,
            strip_h,
            list_font,
            line_h: px(17.0),
            list_x: px(12.0) as i32,
            indent: text_w(4, list_font),
        }
    }

    /// `n` pixels at 1x, scaled to the image (at least 1).
    fn px(&self, n: f64) -> u32 {
        (n * self.k).round().max(1.0) as u32
    }
}

/// The list under the charts, "[n] 12 s: what", wrapped at the width
/// (each line with whether it continues the one before); at most a third
/// of the image, the rest said in a last line.
fn marker_list(lay: &Layout, width: u32, height: u32) -> Vec<(bool, String)> {
    let marks = &lay.marks;
    let (list_font, line_h, list_x, indent) = (lay.list_font, lay.line_h, lay.list_x, lay.indent);
    let max_chars =
        (f64::from(width) - f64::from(2 * list_x + indent)) / (0.6 * f64::from(list_font) / 1.24);
    let mut list: Vec<(bool, String)> = Vec::new();
    for (i, m) in marks.iter().enumerate() {
        let line = format!("[{}] {:.0} s: {}", i + 1, m.t_s, m.text);
        for (j, l) in wrap(&line, max_chars.max(0.0) as usize)
            .into_iter()
            .enumerate()
        {
            list.push((j > 0, l));
        }
    }
    let max_lines = ((height / 3) / line_h).max(2) as usize;
    if list.len() > max_lines {
        let mut cut = max_lines - 1;
        while cut > 0 && list[cut].0 {
            cut -= 1;
        }
        let shown = list[..cut].iter().filter(|l| !l.0).count();
        list.truncate(cut);
        list.push((
            false,
            format!(
                "... and {} more (readpath plot --format csv lists every event)",
                marks.len() - shown
            ),
        ));
    }
    list
}

/// A part of the SVG image.
type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

/// Draws the marker list in `bottom`, a wrapped line indented.
fn draw_list(bottom: &Area, lay: &Layout, list: &[(bool, String)]) -> Result<(), PlotError> {
    for (i, (cont, l)) in list.iter().enumerate() {
        bottom.draw(&Text::new(
            l.clone(),
            (
                lay.list_x + if *cont { lay.indent } else { 0 },
                lay.px(6.0) as i32 + (lay.line_h * i as u32) as i32,
            ),
            ("sans-serif", lay.list_font).into_font().color(&BLACK),
        ))?;
    }
    Ok(())
}

/// Splits `rest` into the panels' areas, in `columns` columns (the first
/// half of the panels in the first), stacked in each; each with whether it
/// is the last of its column, which keeps room for the x axis' name.
fn panel_areas<'a>(
    rest: &Area<'a>,
    panels: &[&Panel],
    lay: &Layout,
    columns: usize,
) -> Vec<(Area<'a>, bool)> {
    let x_desc_h = lay.px(18.0);
    // The latency panel, three series and three results on a log
    // axis, gets a third more height than the others.
    let weight = |p: &Panel| if p.log { 4.0 } else { 3.0 };
    let per_column = panels.len().div_ceil(columns.max(1));
    let mut cols = Vec::new();
    let mut left = rest.clone();
    for c in 0..columns.max(1) {
        if c + 1 < columns {
            let w = rest.dim_in_pixel().0 / columns as u32;
            let (a, b) = left.split_horizontally(w);
            cols.push(a);
            left = b;
        } else {
            cols.push(left.clone());
        }
    }
    let mut areas = Vec::new();
    for (col, chunk) in cols.iter().zip(panels.chunks(per_column.max(1))) {
        let total: f64 = chunk.iter().map(|p| weight(p)).sum();
        let avail = f64::from(col.dim_in_pixel().1.saturating_sub(x_desc_h));
        let mut remaining = col.clone();
        for p in &chunk[..chunk.len() - 1] {
            let each = (avail * weight(p) / total).round() as u32;
            let (a, b) = remaining.split_vertically(each);
            areas.push((a, false));
            remaining = b;
        }
        areas.push((remaining, true));
    }
    areas
}

/// Each series' median per settings phase: (start, end, median) of the
/// records in it that completed a read.
fn phase_medians(
    series: &[Series],
    lay: &Layout,
    records: &[&IntervalRecord],
) -> Vec<Vec<(f64, f64, f64)>> {
    let bounds: Vec<f64> = std::iter::once(lay.t0)
        .chain(lay.phases.iter().map(|p| p.0))
        .chain(std::iter::once(lay.t1))
        .collect();
    series
        .iter()
        .map(|(_, _, metric)| {
            bounds
                .windows(2)
                .map(|w| {
                    let m = median(
                        records
                            .iter()
                            .filter(|r| r.t_s - r.interval_s >= w[0] && r.t_s <= w[1])
                            .filter(|r| r.reads > 0)
                            .map(|r| (metric.interval)(r))
                            .collect(),
                    );
                    (w[0], w[1], m)
                })
                .collect()
        })
        .collect()
}

/// What changed from the first phase to the last, one line per series
/// with a value in both (`p99 1.0 ms -> 2.0 ms, +100%`), marked as the
/// explorer marks it by the one verdict rule (`output::verdict`, 2 s
/// windows after a 1 s settle): `~` and `within noise` where the two
/// phases' windows overlap, `a hint, chance by noise 10%` where they lie
/// apart in too few windows for a finding, `too short to judge` under two
/// windows a side; none without phases.
fn phase_results(
    panel: &Panel,
    medians: &[Vec<(f64, f64, f64)>],
    lay: &Layout,
    records: &[&IntervalRecord],
) -> Vec<PhaseResult> {
    if lay.phases.is_empty() {
        return Vec::new();
    }
    let phase = |from: f64, to: f64| -> Vec<&IntervalRecord> {
        records
            .iter()
            .copied()
            .filter(|r| r.t_s - r.interval_s >= from && r.t_s <= to)
            .collect()
    };
    let first = phase(lay.t0, lay.phases[0].0);
    let last = phase(lay.phases[lay.phases.len() - 1].0, lay.t1);
    let wf = crate::output::verdict::window_stats(
        &first,
        crate::output::verdict::WINDOW_S,
        crate::output::verdict::SETTLE_S,
    );
    let wl = crate::output::verdict::window_stats(
        &last,
        crate::output::verdict::WINDOW_S,
        crate::output::verdict::SETTLE_S,
    );
    panel
        .series
        .iter()
        .zip(medians)
        .filter_map(|((sname, _, m), ms)| {
            let a = ms.iter().map(|m| m.2).find(|v| v.is_finite())?;
            let b = ms.iter().rev().map(|m| m.2).find(|v| v.is_finite())?;
            let pct = if a != 0.0 { (b - a) / a * 100.0 } else { 0.0 };
            let (mark, note) = match crate::output::verdict::judge_windows(&wf, &wl, m, None) {
                Some(v) if v.verdict.kind.is_significant() => ("", String::new()),
                Some(v) if v.verdict.kind == crate::output::verdict::Kind::Hint => (
                    "",
                    format!(
                        " (a hint, chance by noise {})",
                        crate::output::verdict::chance_text(v.verdict.chance.unwrap_or(1.0))
                    ),
                ),
                Some(_) => ("~", " (within noise)".to_string()),
                None => ("", " (too short to judge)".to_string()),
            };
            Some(PhaseResult {
                name: sname,
                values: format!("{} -> {}", say(a, panel.unit()), say(b, panel.unit())),
                change: format!("{mark}{pct:+.0}%"),
                note,
            })
        })
        .collect()
}

/// One series' change from the first phase to the last, said on its chart.
struct PhaseResult {
    /// The series (`p99`).
    name: &'static str,
    /// `3.2 ms -> 3.1 ms`.
    values: String,
    /// `~-3%` (`~`: within noise).
    change: String,
    /// ` (within noise)`, ` (a hint, ...)`, or nothing.
    note: String,
}

impl PhaseResult {
    /// The line in `form` 0 (`p99 3.2 ms -> 3.1 ms, ~-3% (within
    /// noise)`), 1 (the values left out) or 2 (the note too: the `~`
    /// still marks noise); the change is never cut.
    fn text(&self, form: usize) -> String {
        let (n, v, c, note) = (self.name, &self.values, &self.change, &self.note);
        match form {
            0 => format!("{n} {v}, {c}{note}"),
            1 => format!("{n} {c}{note}"),
            _ => format!("{n} {c}"),
        }
    }

    /// The rows drawn of `results` (each item the series' index and its
    /// text): on a slide all in one row, shortest form, where that fits
    /// the plot's width; else one a row in the fullest form in which each
    /// fits (a narrow chart, a slide's large type), one form for all so
    /// they read alike.
    fn rows(results: &[PhaseResult], lay: &Layout) -> Vec<Vec<(usize, String)>> {
        let ty = ResultType::of(lay);
        let max_w = lay.plot_w - lay.px(12.0) as i32;
        if lay.slide && results.len() > 1 {
            let row: Vec<(usize, String)> = results
                .iter()
                .enumerate()
                .map(|(i, r)| (i, r.text(2)))
                .collect();
            if ty.row_w(&row) <= max_w {
                return vec![row];
            }
        }
        let form = (0..2)
            .find(|&f| {
                results
                    .iter()
                    .enumerate()
                    .all(|(i, r)| ty.row_w(&[(i, r.text(f))]) <= max_w)
            })
            .unwrap_or(2);
        results
            .iter()
            .enumerate()
            .map(|(i, r)| vec![(i, r.text(form))])
            .collect()
    }
}

/// How results are set: their font, the stroke of their series' colour
/// before each, the gap after it and between two in a row, in pixels.
struct ResultType {
    font: u32,
    swatch: i32,
    swatch_gap: i32,
    item_gap: i32,
}

impl ResultType {
    /// A document's results a little larger than its tick labels; a
    /// slide's (already twice and more) as large as its tick labels, with
    /// shorter strokes, so three fit in one row over a column's chart.
    fn of(lay: &Layout) -> ResultType {
        let (font, swatch, swatch_gap, item_gap) = if lay.slide {
            (12.0, 12.0, 4.0, 12.0)
        } else {
            (14.0, 18.0, 6.0, 18.0)
        };
        ResultType {
            font: lay.px(font),
            swatch: lay.px(swatch) as i32,
            swatch_gap: lay.px(swatch_gap) as i32,
            item_gap: lay.px(item_gap) as i32,
        }
    }

    /// A text's drawn width: the estimate (an average glyph's), a little
    /// more (digits and capitals run wider).
    fn text_w(&self, text: &str) -> i32 {
        (f64::from(text_w(text.chars().count(), self.font)) * 1.08) as i32
    }

    /// The pixels a row of results takes: each text after its stroke,
    /// the items apart.
    fn row_w(&self, row: &[(usize, String)]) -> i32 {
        row.iter()
            .map(|(_, t)| self.text_w(t) + self.swatch + self.swatch_gap)
            .sum::<i32>()
            + self.item_gap * (row.len() as i32 - 1).max(0)
    }
}

/// The y axis' range for `values` (their largest `max`), leaving a share
/// `frac` of the height free at the top: from 0 on a linear axis, from the
/// power of ten under the least positive value on a log one.
fn y_range(log: bool, values: &[f64], max: f64, frac: f64) -> (f64, f64) {
    if log {
        let lo = values
            .iter()
            .copied()
            .filter(|v| *v > 0.0)
            .fold(f64::INFINITY, f64::min);
        let lo = if lo.is_finite() {
            10f64.powf(lo.log10().floor())
        } else {
            1.0
        };
        let (llo, lmax) = (lo.log10(), max.log10().max(lo.log10()));
        // At most a decade of headroom: the curves keep most of
        // the height.
        let need = lmax + ((lmax - llo).max(1.0) * frac / (1.0 - frac)).min(1.0);
        (lo, 10f64.powf(need).max(lo * 10.0))
    } else {
        (0.0, max / (1.0 - frac))
    }
}

/// Every finite value of the series in the records.
fn finite_values(series: &[Series], records: &[&IntervalRecord]) -> Vec<f64> {
    records
        .iter()
        .flat_map(|r| series.iter().map(move |(_, _, m)| (m.interval)(r)))
        .filter(|v| v.is_finite())
        .collect()
}

/// The y axis' unit for a panel over `lo..hi` (a time's in us, ms or s),
/// how many of the values' unit it is, and the panel's title with it.
fn axis_unit(panel: &Panel, lo: f64, hi: f64) -> (&'static str, f64, String) {
    let (unit, scale) = match panel.unit() {
        Unit::Us if panel.log => time_unit((lo * hi).sqrt()),
        Unit::Us => time_unit(hi),
        Unit::MsPerS => ("ms per s", 1.0),
        u => (u.symbol(), 1.0),
    };
    let name = if panel.log {
        format!("{} ({unit}, log axis)", panel.title)
    } else {
        format!("{} ({unit})", panel.title)
    };
    (unit, scale, name)
}

/// Draws one panel in `area`: its title with the unit, the chart, the
/// marker numbers over it and the result at its top right; the `last`
/// one also names the x axis.
fn draw_panel(
    area: &Area,
    panel: &Panel,
    last: bool,
    lay: &Layout,
    records: &[&IntervalRecord],
) -> Result<(), PlotError> {
    let px = |n: f64| lay.px(n);
    let series = panel.series;
    let (x_lab, x_desc_h) = (px(24.0), px(18.0));
    let x_lab_h = if last { x_lab + x_desc_h } else { x_lab };
    let title_font = px(16.0);
    let res_line_h = px(18.0);
    // Each series' median per settings phase, and what changed from
    // the first phase to the last, said on the chart.
    let phase_medians = phase_medians(series, lay, records);
    let results = phase_results(panel, &phase_medians, lay, records);
    let values = finite_values(series, records);
    let max = values.iter().copied().fold(0.0, f64::max).max(1e-3);
    // Headroom over the data for the legend (top left) and the
    // result (top right), so neither hides a curve.
    let plot_h = area
        .dim_in_pixel()
        .1
        .saturating_sub(title_font + px(6.0) + lay.strip_h + x_lab_h + px(4.0))
        .max(1);
    // The results name their series and carry its colour: a legend
    // only where a panel of several series has no result.
    let legend = series.len() > 1 && results.is_empty();
    let rows = PhaseResult::rows(&results, lay);
    let top_lines = rows.len().max(if legend { series.len() } else { 0 });
    let frac = if top_lines == 0 {
        0.05
    } else {
        (f64::from(top_lines as u32 * res_line_h + px(10.0)) / f64::from(plot_h)).clamp(0.05, 0.45)
    };
    let (lo, hi) = y_range(panel.log, &values, max, frac);
    let (unit, scale, name) = axis_unit(panel, lo, hi);
    let inner = area.titled(&name, ("sans-serif", title_font))?;
    let (strip, chart_area) = inner.split_vertically(lay.strip_h);
    let tick_font = px(12.0);
    // A log axis is labelled at each power of ten (plotters drops
    // some when asked for fewer labels than decades).
    let y_labels = if panel.log {
        (hi / lo).log10().ceil() as usize + 2
    } else {
        (plot_h / (tick_font * 2)).clamp(3, 10) as usize
    };
    let lines = Lines {
        series,
        phase_medians: &phase_medians,
        unit,
        scale,
        y_labels,
        tick_font,
        lo,
        hi,
        last,
        legend,
    };
    let (xs, ys) = draw_chart(&chart_area, x_lab_h, panel.log, &lines, lay, records)?;
    draw_numbers(&strip, &chart_area, lay, ys.start)?;
    draw_results(&chart_area, series, &rows, (xs.end, ys.start), lay)
}

/// Builds a panel's chart in `chart_area` (room for `x_lab_h` pixels of x
/// labels under it), on a `log` or a linear y axis, and draws its lines
/// (see [`draw_lines`]); returns the plotting area's pixels.
fn draw_chart(
    chart_area: &Area,
    x_lab_h: u32,
    log: bool,
    l: &Lines,
    lay: &Layout,
    records: &[&IntervalRecord],
) -> Result<(Range<i32>, Range<i32>), PlotError> {
    let mut chart = ChartBuilder::on(chart_area);
    chart
        .margin_left(lay.margin)
        .margin_right(lay.margin)
        .margin_bottom(lay.px(4.0))
        .x_label_area_size(x_lab_h)
        .y_label_area_size(lay.y_lab);
    if log {
        let mut c = chart.build_cartesian_2d(lay.t0..lay.t1, (l.lo..l.hi).log_scale())?;
        // An interval with no completed read has no latency.
        draw_lines(&mut c, l, lay, |g| {
            records
                .iter()
                .filter(|r| r.reads > 0)
                .map(|r| (r.t_s, g(r).max(l.lo)))
                .collect()
        })
    } else {
        let mut c = chart.build_cartesian_2d(lay.t0..lay.t1, l.lo..l.hi)?;
        draw_lines(&mut c, l, lay, |g| {
            records.iter().map(|r| (r.t_s, g(r))).collect()
        })
    }
}

/// What [`draw_lines`] draws on a panel's chart, besides its points.
struct Lines<'p> {
    /// The panel's series.
    series: &'static [Series],
    /// Each series' medians per phase (see [`phase_medians`]).
    phase_medians: &'p [Vec<(f64, f64, f64)>],
    /// The y axis' unit, and how many of the values' unit it is.
    unit: &'static str,
    scale: f64,
    /// How many y labels, and their font.
    y_labels: usize,
    tick_font: u32,
    /// The y axis' range.
    lo: f64,
    hi: f64,
    /// The last panel: it names the x axis.
    last: bool,
    /// A legend is drawn (top left).
    legend: bool,
}

/// Draws the mesh, the markers' lines, the phase medians, the series (the
/// points `points` gives for each getter) with their legend, on a log or a
/// linear y axis; returns the plotting area's pixels.
fn draw_lines<'a, 'b: 'a, Y>(
    c: &mut ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, Y>>,
    l: &Lines,
    lay: &Layout,
    points: impl Fn(Getter) -> Vec<(f64, f64)>,
) -> Result<(Range<i32>, Range<i32>), PlotError>
where
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let px = |n: f64| lay.px(n);
    let (lo, hi, scale) = (l.lo, l.hi, l.scale);
    let x_fmt = |v: &f64| fmt_tick(*v);
    let y_fmt = move |v: &f64| fmt_tick(*v / scale);
    let mut mesh = c.configure_mesh();
    mesh.label_style(("sans-serif", l.tick_font))
        .axis_desc_style(("sans-serif", px(13.0)))
        .y_desc(l.unit)
        .y_labels(l.y_labels)
        .x_label_formatter(&x_fmt)
        .y_label_formatter(&y_fmt);
    if l.last {
        mesh.x_desc("seconds");
    }
    mesh.draw()?;
    for m in &lay.marks {
        c.draw_series(LineSeries::new(
            [(m.t_s, lo), (m.t_s, hi)],
            MARK.mix(0.7).stroke_width(px(1.0)),
        ))?;
    }
    // Each phase's median, dashed, between its markers.
    for (ms, (_, color, _)) in l.phase_medians.iter().zip(l.series) {
        for &(a, b, m) in ms
            .iter()
            .filter(|m| m.2.is_finite() && !lay.phases.is_empty())
        {
            let y = if lo > 0.0 { m.max(lo) } else { m };
            c.draw_series(DashedLineSeries::new(
                [(a, y), (b, y)],
                px(6.0),
                px(4.0),
                color.mix(0.7).stroke_width(px(2.0)),
            ))?;
        }
    }
    for (sname, color, m) in l.series {
        let color = *color;
        c.draw_series(LineSeries::new(
            points(m.interval),
            color.stroke_width(px(2.0)),
        ))?
        .label(*sname)
        .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], color.stroke_width(2)));
    }
    if l.legend {
        c.configure_series_labels()
            .label_font(("sans-serif", px(13.0)))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperLeft)
            .draw()?;
    }
    Ok(c.plotting_area().get_pixel_range())
}

/// Draws the marker numbers in `strip`, over the plotting area (its top
/// at `plot_top`, in pixels of the image), each with a short line to its
/// marker when it had to move.
fn draw_numbers(
    strip: &Area,
    chart_area: &Area,
    lay: &Layout,
    plot_top: i32,
) -> Result<(), PlotError> {
    let px = |n: f64| lay.px(n);
    let (bx, _) = chart_area.get_base_pixel();
    let (sx, sy) = strip.get_base_pixel();
    for (i, p) in lay.placed.iter().enumerate() {
        let Some((x, row)) = *p else { continue };
        let y = lay.strip_h as i32 - px(2.0) as i32 - (row as i32 + 1) * lay.row_h as i32;
        strip.draw(&Text::new(
            lay.numbers[i].clone(),
            (x + bx - sx, y),
            ("sans-serif", lay.num_font, FontStyle::Bold)
                .into_font()
                .color(&MARK),
        ))?;
        if row == 0 {
            let from = (
                x + lay.widths[i] / 2 + bx - sx,
                y + (f64::from(lay.num_font) / 1.24) as i32 + 1,
            );
            let to = (lay.centres[i] + bx - sx, plot_top - sy);
            if from.0 != to.0 {
                strip.draw(&PathElement::new([from, to], MARK.mix(0.7).stroke_width(1)))?;
            }
        }
    }
    Ok(())
}

/// Draws the results' rows in `chart_area`, top right inside the plot
/// (whose right edge and top are `corner`, in pixels of the image), on a
/// light ground so a curve under them does not hide them, each text after
/// a stroke of its series' colour (the legend, where there is a result).
fn draw_results(
    chart_area: &Area,
    series: &[Series],
    rows: &[Vec<(usize, String)>],
    corner: (i32, i32),
    lay: &Layout,
) -> Result<(), PlotError> {
    let px = |n: f64| lay.px(n);
    let (bx, by) = chart_area.get_base_pixel();
    let ty = ResultType::of(lay);
    let res_line_h = px(18.0);
    let right = corner.0 - bx - px(6.0) as i32;
    for (i, row) in rows.iter().enumerate() {
        let y = corner.1 - by + px(4.0) as i32 + i as i32 * res_line_h as i32;
        let left = right - ty.row_w(row);
        chart_area.draw(&Rectangle::new(
            [(left - 4, y - 2), (right + 4, y + res_line_h as i32 - 2)],
            WHITE.mix(0.85).filled(),
        ))?;
        let mid = y + (f64::from(ty.font) / 1.24 / 2.0) as i32;
        // Right to left, each text's end where it is meant to be (the
        // width estimate is what may err).
        let mut x = right;
        for (si, text) in row.iter().rev() {
            chart_area.draw(&Text::new(
                text.clone(),
                (x, y),
                ("sans-serif", ty.font)
                    .into_font()
                    .color(&BLACK)
                    .pos(Pos::new(HPos::Right, VPos::Top)),
            ))?;
            x -= ty.text_w(text) + ty.swatch_gap + ty.swatch;
            chart_area.draw(&PathElement::new(
                [(x, mid), (x + ty.swatch, mid)],
                series[*si].1.stroke_width(px(3.0)),
            ))?;
            x -= ty.item_gap;
        }
    }
    Ok(())
}

/// Turns an SVG document into a PNG of exactly `width` x `height` with
/// `rsvg-convert` (Debian: librsvg2-bin), through its stdin and stdout: no
/// temporary file; the caller writes the bytes (atomically). A stop signal
/// kills it and ends with a [`crate::files::Stopped`] error.
pub fn rasterize(svg: &[u8], width: u32, height: u32) -> anyhow::Result<Vec<u8>> {
    use std::io::Write as _;
    let child = std::process::Command::new("rsvg-convert")
        .args([
            "--width",
            &width.to_string(),
            "--height",
            &height.to_string(),
        ])
        .arg("--background-color=white")
        .arg("--format=png")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => anyhow::bail!(
            "PNG output needs rsvg-convert (Debian package librsvg2-bin): {e}; or write an .svg"
        ),
    };
    let mut stdin = child.stdin.take().expect("piped stdin");
    let svg = svg.to_vec();
    // Fed and read from threads so a large PNG on stdout cannot deadlock
    // the pipes, while this thread polls for a stop signal.
    let feeder = std::thread::spawn(move || stdin.write_all(&svg));
    let drain = |mut from: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            from.read_to_end(&mut v).map(|_| v)
        })
    };
    let stdout = drain(Box::new(child.stdout.take().expect("piped stdout")));
    let stderr = drain(Box::new(child.stderr.take().expect("piped stderr")));
    let status = loop {
        if let Some(st) = child.try_wait()? {
            break st;
        }
        if crate::sys::stop_requested() {
            let _ = child.kill();
            let _ = child.wait();
            return Err(crate::files::Stopped::now(
                "while rsvg-convert drew the PNG: nothing was written".into(),
            )
            .into());
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let joined = |t: std::thread::JoinHandle<std::io::Result<Vec<u8>>>| {
        t.join()
            .map_err(|_| anyhow::anyhow!("reading rsvg-convert"))?
            .map_err(anyhow::Error::from)
    };
    let (out, err) = (joined(stdout)?, joined(stderr)?);
    let fed = feeder
        .join()
        .map_err(|_| anyhow::anyhow!("feeding rsvg-convert"))?;
    if !status.success() {
        anyhow::bail!(
            "rsvg-convert failed ({status}): {}",
            String::from_utf8_lossy(&err).trim()
        );
    }
    fed?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_fields_are_quoted_and_cannot_drive_a_terminal_or_a_spreadsheet() {
        assert_eq!(
            csv_field("workers.mode: a -> b"),
            "\"workers.mode: a -> b\""
        );
        assert_eq!(csv_field(""), "\"\"");
        // RFC 4180: quotes doubled inside a quoted field; commas stay.
        assert_eq!(csv_field("say \"hi\", then"), "\"say \"\"hi\"\", then\"");
        // OSC 0 (title), OSC 52 (clipboard), CSI 2J (clear), a newline and
        // a C1 CSI: no control character survives, the row stays one line.
        let hostile = "\x1b]0;pwned\x07\x1b]52;c;ZWNobyBoaQ==\x1b\\\x1b[2J\nnext\r\u{9b}31m";
        let f = csv_field(hostile);
        assert!(!f.chars().any(char::is_control), "{f:?}");
        assert!(f.contains("]0;pwned") && f.contains("[2J"), "{f:?}");
        // Formulas are text.
        assert_eq!(csv_field("=HYPERLINK(\"x\")"), "\"'=HYPERLINK(\"\"x\"\")\"");
        assert_eq!(csv_field("@SUM(A1)"), "\"'@SUM(A1)\"");
    }

    #[test]
    fn marker_numbers_are_nudged_right_then_wrapped_never_overlapping() {
        // Three at one place: side by side, in order, `gap` apart.
        let p = place_labels(&[100, 100, 100], &[20, 20, 20], 0, 1000, 5);
        assert_eq!(p, vec![Some((90, 0)), Some((115, 0)), Some((140, 0))]);
        // At the left edge: moved in, not onto the axis.
        assert_eq!(place_labels(&[3], &[20], 10, 1000, 5), vec![Some((10, 0))]);
        // At the right edge: the one that no longer fits takes a second row.
        let p = place_labels(&[95, 95, 95], &[20, 20, 20], 0, 100, 5);
        assert_eq!(p, vec![Some((80, 0)), Some((80, 1)), Some((80, 2))]);
        // Past MAX_ROWS: left off rather than drawn over another.
        let p = place_labels(&[95; 5], &[20; 5], 0, 100, 5);
        assert_eq!(p[3..], [None, None]);
    }

    #[test]
    fn ticks_are_plain_numbers_and_times_get_one_unit() {
        for (v, s) in [(0.0, "0"), (0.01, "0.01"), (2.5, "2.5"), (250.0, "250")] {
            assert_eq!(fmt_tick(v), s);
        }
        assert_eq!(fmt_tick(0.1 + 0.2), "0.3");
        assert_eq!(time_unit(500.0), ("us", 1.0));
        assert_eq!(time_unit(50_000.0), ("ms", 1e3));
        assert_eq!(time_unit(5e6), ("s", 1e6));
    }

    #[test]
    fn metric_names_pick_panels_and_a_bad_one_is_named() {
        let names = |n: &[&str]| n.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            metric_panels(&names(&["sched", "latency"])),
            Ok(vec![0, 2, 3])
        );
        assert_eq!(
            metric_panels(&names(&["run_delay", "run_delay"])),
            Ok(vec![3])
        );
        let e = metric_panels(&names(&["iops"])).unwrap_err().to_string();
        assert!(
            e.contains("\"iops\"") && e.contains("run_delay, sched"),
            "{e}"
        );
        // Every name --metric takes means something here.
        for n in METRIC_NAMES {
            assert!(metric_panels(&names(&[n])).is_ok_and(|p| !p.is_empty()));
        }
    }

    #[test]
    fn list_lines_wrap_at_spaces() {
        assert_eq!(wrap("aaa bbb ccc", 8), vec!["aaa bbb", "ccc"]);
        assert_eq!(wrap("", 8), vec![""]);
        assert_eq!(wrap("abcdefghijkl", 8), vec!["abcdefgh", "ijkl"]);
    }
}
