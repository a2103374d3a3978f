//! The timeline as a picture for slides (`readpath plot --timeline`): the
//! explorer's lanes drawn from a recording's spans, one window or two side
//! by side (a seed's before and after), as an SVG. A talk about a
//! placement change is best told with one picture: bound, the items stay
//! on the CPU that queued them; unbound, they move and wait to be woken
//! there. Each window says what it holds in numbers computed from its own
//! spans (items, how many moved, their waits) and from the intervals
//! under it, never a verdict: a 200 ms window is an illustration, the
//! experiment (`compare`) is the measurement.
//!
//! A lane is drawn as the explorer's is, a pixel column standing for a
//! slice of the window: its bar's height says how much of the slice work
//! items filled and its colour the stage that filled most of it (a
//! column with any item shows at least a sliver), a hog's time is a pale
//! bar behind, and a thin strip under the bar marks the slices in which an
//! item that ran there was waiting to start. Columns alike are merged, so
//! the SVG holds at most a few rectangles per pixel column and lane,
//! whatever the number of items. The item that waited longest in each
//! window is drawn as an arrow from its queueing (on the CPU that queued
//! it) to its start.

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::plot::{Look, PlotError, say, text_w};
use super::recording::Recording;
use crate::metrics::{
    IntervalRecord, Role, Span, SpanKind, TimelineThread, fill_columns as fill, median, table,
};

/// The longest window (`--window`), ns.
pub const MAX_WINDOW_NS: u64 = 10_000_000_000;
/// The shortest window (`--window`), ns.
pub const MIN_WINDOW_NS: u64 = 1_000_000;
/// Most windows side by side (`--at`).
pub const MAX_WINDOWS: usize = 2;

const DECRYPT: RGBColor = RGBColor(40, 90, 200);
const VERIFY: RGBColor = RGBColor(0, 140, 60);
const BOTH: RGBColor = RGBColor(220, 140, 0);
const HOG: RGBColor = RGBColor(240, 185, 185);
const READER: RGBColor = RGBColor(70, 70, 70);
const ASLEEP: RGBColor = RGBColor(185, 185, 185);
const MARK: RGBColor = RGBColor(200, 0, 200);
const GRID: RGBColor = RGBColor(215, 215, 215);
const DIM: RGBColor = RGBColor(90, 90, 90);

/// A work item kind's colour.
fn color(kind: SpanKind) -> RGBColor {
    match kind {
        SpanKind::Decrypt => DECRYPT,
        SpanKind::Verify => VERIFY,
        SpanKind::DecryptVerify => BOTH,
        SpanKind::Sleep => ASLEEP,
        SpanKind::Hog => HOG,
    }
}

/// `c` a `share` of the way to white (a wait's paler colour).
fn pale(c: RGBColor, share: f64) -> RGBColor {
    let m = |v: u8| (f64::from(v) + (255.0 - f64::from(v)) * share).round() as u8;
    RGBColor(m(c.0), m(c.1), m(c.2))
}

/// What `plot --timeline` was asked: the windows' starts (none: chosen
/// from the recording's settings phases) and their length.
#[derive(Debug, Clone, PartialEq)]
pub struct Ask {
    /// `--at`: each window's start, ns since the run started.
    pub at_ns: Vec<u64>,
    /// `--window`, ns.
    pub window_ns: u64,
}

/// Why the lanes could not be drawn: what the recording holds instead.
#[derive(Debug, thiserror::Error)]
pub enum LanesError {
    /// No interval carries spans.
    #[error(
        "no interval carries a timeline: record with `run --record FILE --timeline` (or `compare`), or in the explorer with the timeline (t) open or --trace"
    )]
    NoSpans,
    /// A window asked for holds no span.
    #[error("--at {at}: no span between {at} and {end}; the recording's spans cover {covered}")]
    EmptyWindow {
        /// The window's start and end, as said.
        at: String,
        end: String,
        /// The traced stretches, as said.
        covered: String,
    },
    /// The drawing.
    #[error(transparent)]
    Plot(#[from] PlotError),
}

impl From<DrawError> for LanesError {
    fn from(e: DrawError) -> LanesError {
        LanesError::Plot(PlotError::Draw(e))
    }
}

type DrawError = super::plot::DrawError;

/// A time as the picture says it (`2.400 s`).
fn secs(ns: u64) -> String {
    format!("{:.3} s", ns as f64 / 1e9)
}

/// The stretches of the run whose intervals carry spans, ns, merged where
/// they touch.
fn traced(rec: &Recording) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::new();
    for r in rec.records.iter().filter(|r| r.timeline.is_some()) {
        let a = ((r.t_s - r.interval_s).max(0.0) * 1e9) as u64;
        let b = (r.t_s.max(0.0) * 1e9) as u64;
        match out.last_mut() {
            // Touching within a millisecond (interval ends are rounded).
            Some(last) if a <= last.1 + 1_000_000 => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

/// The traced stretches, as an error says them.
fn say_traced(t: &[(u64, u64)]) -> String {
    let mut parts: Vec<String> = t
        .iter()
        .take(4)
        .map(|(a, b)| format!("{:.1}-{:.1} s", *a as f64 / 1e9, *b as f64 / 1e9))
        .collect();
    if t.len() > 4 {
        parts.push(format!("and {} more", t.len() - 4));
    }
    parts.join(", ")
}

/// A setting that changed during the run: (when, key, from, to), from the
/// records' `key: a -> b` events.
type Change = (u64, String, String, String);

fn changes(rec: &Recording) -> Vec<Change> {
    rec.records
        .iter()
        .flat_map(|r| r.events.iter())
        .filter_map(|e| {
            let (k, rest) = e.label.split_once(": ")?;
            let (a, b) = rest.split_once(" -> ")?;
            (k.contains('.') && !k.contains(' ')).then(|| {
                (
                    (e.t_s.max(0.0) * 1e9) as u64,
                    k.to_string(),
                    a.to_string(),
                    b.to_string(),
                )
            })
        })
        .collect()
}

/// The settings in force at `t` of those that changed (`workers.mode =
/// bound`); with none changed, the preset's A/B key's value, if any.
fn settings_at(rec: &Recording, ch: &[Change], t: u64) -> String {
    let mut keys: Vec<&str> = Vec::new();
    for (_, k, _, _) in ch {
        if !keys.contains(&k.as_str()) {
            keys.push(k);
        }
    }
    if keys.is_empty() {
        let key = rec
            .header
            .preset
            .as_deref()
            .and_then(|p| crate::scenario::preset::resolve(p).ok())
            .and_then(|(p, _)| p.compare.map(|c| c.key));
        return key
            .and_then(|k| Some(format!("{k} = {}", rec.header.settings.get(&k)?)))
            .unwrap_or_default();
    }
    let said: Vec<String> = keys
        .iter()
        .map(|k| {
            let mine = ch.iter().filter(|c| c.1 == *k);
            let v = match mine.clone().rfind(|c| c.0 <= t) {
                Some(c) => c.3.clone(),
                None => mine.clone().next().map_or(String::new(), |c| c.2.clone()),
            };
            format!("{k} = {v}")
        })
        .collect();
    crate::output::format::printable(&said.join(", "), false)
}

/// The default windows: the middle of the first settings phase with spans
/// and of the next phase under other settings (a seed's before and after),
/// else of the first traced stretch.
fn default_windows(rec: &Recording, ch: &[Change], window: u64) -> Vec<u64> {
    let tr = traced(rec);
    let end = tr.last().map_or(0, |t| t.1);
    let mut bounds: Vec<u64> = std::iter::once(0).chain(ch.iter().map(|c| c.0)).collect();
    bounds.push(end.max(1));
    // Each phase's longest traced part.
    let mut phases: Vec<(u64, u64, String)> = Vec::new();
    for w in bounds.windows(2) {
        let best = tr
            .iter()
            .map(|&(a, b)| (a.max(w[0]), b.min(w[1])))
            .filter(|(a, b)| b > a)
            .max_by_key(|(a, b)| b - a);
        if let Some((a, b)) = best {
            phases.push((a, b, settings_at(rec, ch, a + (b - a) / 2)));
        }
    }
    let centred = |(a, b): (u64, u64)| {
        let mid = a + (b - a) / 2;
        mid.saturating_sub(window / 2).max(a)
    };
    let Some(first) = phases.first() else {
        return Vec::new();
    };
    let mut out = vec![centred((first.0, first.1))];
    if let Some(other) = phases.iter().find(|p| p.2 != first.2) {
        out.push(centred((other.0, other.1)));
    }
    out
}

/// One window's spans and what is said of it.
struct Window<'a> {
    from: u64,
    to: u64,
    /// Its spans: those running in it, and items waiting in it.
    spans: Vec<Span>,
    /// The threads they name.
    threads: Vec<TimelineThread>,
    /// Spans not kept in the intervals under it.
    dropped: u64,
    /// The intervals under it.
    records: Vec<&'a IntervalRecord>,
    /// The settings in force.
    settings: String,
}

impl<'a> Window<'a> {
    fn of(rec: &'a Recording, ch: &[Change], from: u64, len: u64) -> Window<'a> {
        let to = from + len;
        let mut spans = Vec::new();
        let mut threads: Vec<TimelineThread> = Vec::new();
        let mut dropped = 0;
        let mut records = Vec::new();
        for r in &rec.records {
            let (a, b) = (
                ((r.t_s - r.interval_s).max(0.0) * 1e9) as u64,
                (r.t_s.max(0.0) * 1e9) as u64,
            );
            let under = a < to && b > from;
            if under {
                records.push(r);
            }
            let Some(t) = &r.timeline else { continue };
            if under {
                dropped += t.dropped;
            }
            let before = spans.len();
            spans.extend(
                t.spans
                    .iter()
                    .filter(|s| s.end_ns >= from && s.queued_ns < to)
                    .copied(),
            );
            if spans.len() > before {
                for th in &t.threads {
                    if !threads.iter().any(|x| x.tid == th.tid) {
                        threads.push(th.clone());
                    }
                }
            }
        }
        Window {
            from,
            to,
            spans,
            threads,
            dropped,
            records,
            settings: settings_at(rec, ch, from + len / 2),
        }
    }

    /// The work items that started in it.
    fn items(&self) -> impl Iterator<Item = &Span> {
        self.spans
            .iter()
            .filter(|s| s.kind.is_item() && (self.from..self.to).contains(&s.start_ns))
    }

    /// The readers, by name.
    fn readers(&self) -> Vec<(i32, String)> {
        let mut r: Vec<(i32, String)> = self
            .threads
            .iter()
            .filter(|t| t.role == Role::Reader)
            .filter(|t| {
                self.spans
                    .iter()
                    .any(|s| s.tid == t.tid && s.kind == SpanKind::Sleep)
            })
            .map(|t| (t.tid, crate::output::format::printable(&t.name, false)))
            .collect();
        r.sort_by(|a, b| a.1.cmp(&b.1));
        r
    }

    /// The item that waited longest to start, of those that started in it.
    fn longest_wait(&self) -> Option<Span> {
        self.items().max_by_key(|s| s.wait_ns()).copied()
    }

    /// What it holds, in words: the lines under it.
    fn summary(&self, metric: Option<&'static table::Metric>) -> Vec<String> {
        let items: Vec<&Span> = self.items().collect();
        let mut out = Vec::new();
        if items.is_empty() {
            out.push("no work item started in it".to_string());
        } else {
            let moved = items.iter().filter(|s| s.queued_cpu != s.cpu).count();
            out.push(format!(
                "{} items, {:.0}% ran on another CPU than queued",
                items.len(),
                100.0 * moved as f64 / items.len() as f64
            ));
            let mut waits: Vec<f64> = items.iter().map(|s| s.wait_ns() as f64 / 1e3).collect();
            waits.sort_by(f64::total_cmp);
            out.push(format!(
                "wait to start: median {}, longest {}",
                say_us(median(waits.clone())),
                say_us(*waits.last().unwrap_or(&0.0))
            ));
        }
        if !self.records.is_empty() {
            let mut parts = Vec::new();
            let mut shown: Vec<&str> = Vec::new();
            for m in metric
                .into_iter()
                .chain([&table::RUN_DELAY, &table::QUEUE_P99])
            {
                if shown.contains(&m.name) {
                    continue;
                }
                shown.push(m.name);
                let v: Vec<f64> = self
                    .records
                    .iter()
                    .map(|r| (m.interval)(r))
                    .filter(|v| v.is_finite())
                    .collect();
                if !v.is_empty() {
                    parts.push(format!("{} {}", metric_name(m), say(median(v), m.unit)));
                }
            }
            if !parts.is_empty() {
                let under = match self.records.len() {
                    1 => "its interval".to_string(),
                    n => format!("median of {n} intervals"),
                };
                out.push(format!("{} ({under})", parts.join(", ")));
            }
        }
        if self.dropped > 0 {
            out.push(format!(
                "{} spans not kept (logs full): lanes miss items",
                self.dropped
            ));
        }
        out
    }
}

/// A metric's name as a sentence says it, without its unit: its label's
/// words (`run_delay`, `queue p99`), or its name's first (`throughput`)
/// where the label is a unit alone (`MiB/s`).
fn metric_name(m: &table::Metric) -> &'static str {
    match m.label.rsplit_once(' ') {
        Some((words, _)) => words,
        None => m.name.split('_').next().unwrap_or(m.name),
    }
}

/// A time in us as a slide says it (`4.6 ms`), as the charts say it.
fn say_us(us: f64) -> String {
    say(us, crate::metrics::Unit::Us)
}

/// The windows `ask` names, each checked to hold spans.
fn windows<'a>(rec: &'a Recording, ask: &Ask) -> Result<Vec<Window<'a>>, LanesError> {
    let tr = traced(rec);
    if tr.is_empty()
        || rec
            .records
            .iter()
            .flat_map(|r| &r.timeline)
            .all(|t| t.spans.is_empty())
    {
        return Err(LanesError::NoSpans);
    }
    let ch = changes(rec);
    let starts = if ask.at_ns.is_empty() {
        default_windows(rec, &ch, ask.window_ns)
    } else {
        ask.at_ns.clone()
    };
    let mut out = Vec::new();
    for at in starts {
        let w = Window::of(rec, &ch, at, ask.window_ns);
        if w.spans.is_empty() {
            return Err(LanesError::EmptyWindow {
                at: secs(at),
                end: secs(at + ask.window_ns),
                covered: say_traced(&tr),
            });
        }
        out.push(w);
    }
    if out.is_empty() {
        return Err(LanesError::NoSpans);
    }
    Ok(out)
}

/// One lane's pixel columns: per column the ns each item kind filled, the
/// hogs', and whether an item that ran there was waiting in it (the kind
/// of the longest such wait).
struct Columns {
    items: Vec<[u64; 3]>,
    hog: Vec<u64>,
    wait: Vec<[u64; 3]>,
}

impl Columns {
    fn new(n: usize) -> Columns {
        Columns {
            items: vec![[0; 3]; n],
            hog: vec![0; n],
            wait: vec![[0; 3]; n],
        }
    }
}

/// A bar's height in eighths of its lane: how much of the column it
/// filled, at least one eighth when anything did.
fn eighths(ns: u64, per: u64) -> u32 {
    if ns == 0 {
        0
    } else {
        ((ns * 8).div_ceil(per)).clamp(1, 8) as u32
    }
}

/// A run of alike columns: (first column, columns, colour, eighths).
type Run = (usize, usize, RGBColor, u32);

/// Merges alike neighbouring columns into runs (`f`: a column's colour
/// and height, None where nothing is drawn).
fn runs(n: usize, f: impl Fn(usize) -> Option<(RGBColor, u32)>) -> Vec<Run> {
    let mut out: Vec<Run> = Vec::new();
    for c in 0..n {
        let Some((col, h)) = f(c) else { continue };
        match out.last_mut() {
            Some(r) if r.0 + r.1 == c && r.2 == col && r.3 == h => r.1 += 1,
            _ => out.push((c, 1, col, h)),
        }
    }
    out
}

/// A part of the SVG image.
type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

/// Sizes, scaled to the image as the charts' are.
struct Scale {
    k: f64,
}

impl Scale {
    fn new(width: u32, height: u32, look: Look) -> Scale {
        let s = if look.slide { Look::SLIDE_SCALE } else { 1.0 };
        Scale {
            k: ((f64::from(width) / 1200.0).min(f64::from(height) / 900.0) * s).clamp(0.9, 4.0 * s),
        }
    }

    fn px(&self, n: f64) -> u32 {
        (n * self.k).round().max(1.0) as u32
    }

    fn font(&self, n: f64) -> TextStyle<'static> {
        ("sans-serif", self.px(n)).into_font().color(&BLACK)
    }
}

/// What the picture says it shows, once drawn: the windows' times.
pub struct Drawn {
    /// The SVG document.
    pub svg: String,
    /// The windows' starts and length, said (`2.400 s and 7.400 s, 200 ms
    /// each`).
    pub windows: String,
}

/// Draws the lanes of `ask`'s windows of `rec` side by side as an SVG of
/// `width` x `height`.
pub fn svg(
    rec: &Recording,
    ask: &Ask,
    width: u32,
    height: u32,
    look: Look,
) -> Result<Drawn, LanesError> {
    let wins = windows(rec, ask)?;
    let sc = Scale::new(width, height, look);
    let px = |n: f64| sc.px(n);
    let published = rec
        .header
        .preset
        .as_deref()
        .and_then(|p| crate::scenario::preset::resolve(p).ok())
        .and_then(|(p, _)| p.published);
    let metric = published.as_ref().and_then(|p| table::metric(&p.metric));
    // The CPU lanes every window draws: each CPU any window's spans name,
    // from 0 to the highest (a gap in the numbers is a CPU that ran
    // nothing, shown empty).
    let cpus = wins
        .iter()
        .flat_map(|w| w.spans.iter())
        .filter(|s| s.kind != SpanKind::Sleep)
        .map(|s| s.cpu.max(s.queued_cpu) as usize + 1)
        .max()
        .unwrap_or(0);
    let readers = wins.iter().map(|w| w.readers().len()).max().unwrap_or(0);

    let mut doc = String::new();
    {
        let root = SVGBackend::with_string(&mut doc, (width, height)).into_drawing_area();
        root.fill(&WHITE)?;
        let title_h = px(34.0);
        let (top, rest) = root.split_vertically(title_h);
        let title = format!("{}: where each work item ran", super::plot::plot_title(rec));
        top.draw(&Text::new(
            title,
            (px(12.0) as i32, (title_h / 2) as i32),
            sc.font(20.0).pos(Pos::new(HPos::Left, VPos::Center)),
        ))?;
        // The foot: the legend, and where the spans come from.
        let foot = foot_lines(rec, published.as_ref(), width, &sc);
        let line_h = px(17.0);
        let legend_rows = legend_places(width, &sc)
            .last()
            .map_or(1, |p| p.1 as u32 + 1);
        let legend_h = px(12.0) + px(18.0) * legend_rows;
        let foot_h = legend_h + line_h * foot.len() as u32;
        let (body, bottom) = rest.split_vertically(height.saturating_sub(title_h + foot_h));
        legend(&bottom, width, &sc)?;
        for (i, l) in foot.iter().enumerate() {
            bottom.draw(&Text::new(
                l.clone(),
                (px(12.0) as i32, (legend_h + line_h * i as u32) as i32),
                sc.font(12.0).color(&DIM),
            ))?;
        }
        let cols = body.split_evenly((1, wins.len()));
        for (area, w) in cols.iter().zip(&wins) {
            draw_window(area, w, cpus, readers, metric, &sc)?;
        }
        root.present()?;
    }
    let starts: Vec<String> = wins.iter().map(|w| secs(w.from)).collect();
    let windows = format!(
        "{} window{} from {}, {} ms each",
        wins.len(),
        if wins.len() == 1 { "" } else { "s" },
        starts.join(" and "),
        ask.window_ns / 1_000_000
    );
    Ok(Drawn { svg: doc, windows })
}

/// The lines under the legend: where the spans come from, the machine,
/// and the published result the picture illustrates.
fn foot_lines(
    rec: &Recording,
    published: Option<&crate::scenario::preset::Published>,
    width: u32,
    sc: &Scale,
) -> Vec<String> {
    let h = &rec.header;
    let kernel = h.settings.workload.target == crate::settings::Target::Kernel;
    let source = if kernel {
        "the kernel's own items (workqueue tracepoints)"
    } else {
        "readpath's model"
    };
    let m = &h.machine;
    let mut text = format!(
        "Spans: {source}, `readpath {}` on {} (Linux {}, {} CPUs).",
        h.command, m.hostname, m.kernel, m.cpus
    );
    if let Some(p) = published {
        let name =
            table::metric(&p.metric).map_or(p.metric.clone(), |m| metric_name(m).to_string());
        let change = if p.change.0 == p.change.1 {
            format!("{:+}%", p.change.0)
        } else {
            format!("{:+} to {:+}%", p.change.0, p.change.1)
        };
        text.push_str(&format!(
            " Published: {name} {change} ({}). A window is an illustration; `readpath compare` measures.",
            p.source
        ));
    }
    let lines = [crate::output::format::printable(&text, false)];
    let max = ((f64::from(width) - f64::from(sc.px(24.0))) / (0.6 * f64::from(sc.px(12.0)) / 1.24))
        .max(10.0) as usize;
    lines
        .iter()
        .flat_map(|l| super::plot::wrap(l, max))
        .take(3)
        .collect()
}

/// The legend's entries: a colour, what it stands for, and whether its
/// swatch is a thin strip (a wait).
const LEGEND: [(RGBColor, &str, bool); 7] = [
    (DECRYPT, "decrypt", false),
    (VERIFY, "verify", false),
    (BOTH, "decrypt+verify", false),
    (HOG, "hog", false),
    (
        RGBColor(140, 203, 167),
        "waiting to start (pale), on its CPU",
        true,
    ),
    (READER, "reader busy (line: asleep in its wait)", false),
    (MARK, "longest wait: queued -> started", false),
];

/// Where each legend entry goes in a picture `width` wide: (x, row).
fn legend_places(width: u32, sc: &Scale) -> Vec<(i32, usize)> {
    let sw = sc.px(12.0) as i32;
    let (left, right) = (sc.px(12.0) as i32, width as i32 - sc.px(12.0) as i32);
    let mut out = Vec::new();
    let (mut x, mut row) = (left, 0);
    for (_, name, _) in LEGEND {
        let w = sw + sc.px(5.0) as i32 + text_w(name.len(), sc.px(12.0));
        if x > left && x + w > right {
            x = left;
            row += 1;
        }
        out.push((x, row));
        x += w + sc.px(16.0) as i32;
    }
    out
}

/// The legend: each colour and what it stands for, in rows.
fn legend(area: &Area, width: u32, sc: &Scale) -> Result<u32, DrawError> {
    let sw = sc.px(12.0) as i32;
    let row_h = sc.px(18.0) as i32;
    let y0 = sc.px(8.0) as i32;
    let places = legend_places(width, sc);
    for ((c, name, thin), (x, row)) in LEGEND.iter().zip(&places) {
        let y = y0 + row_h * *row as i32;
        if *thin {
            // A wait: the stages' pale colours, as a strip.
            let top = y + sw * 2 / 3;
            area.draw(&Rectangle::new(
                [(*x, top), (x + sw / 2, y + sw)],
                pale(DECRYPT, 0.55).filled(),
            ))?;
            area.draw(&Rectangle::new(
                [(x + sw / 2, top), (x + sw, y + sw)],
                c.filled(),
            ))?;
        } else {
            area.draw(&Rectangle::new([(*x, y), (x + sw, y + sw)], c.filled()))?;
        }
        area.draw(&Text::new(
            name.to_string(),
            (x + sw + sc.px(5.0) as i32, y + sw / 2),
            sc.font(12.0).pos(Pos::new(HPos::Left, VPos::Center)),
        ))?;
    }
    Ok(places.last().map_or(1, |p| p.1 as u32 + 1))
}

/// Draws one window in its column: its head, the lanes, the time axis and
/// what it holds in words.
fn draw_window(
    area: &Area,
    w: &Window,
    cpus: usize,
    readers: usize,
    metric: Option<&'static table::Metric>,
    sc: &Scale,
) -> Result<(), DrawError> {
    let px = |n: f64| sc.px(n);
    let (aw, ah) = area.dim_in_pixel();
    let head_font = 15.0;
    let text_font = 13.0;
    let line_h = px(18.0) as i32;
    let margin = px(12.0) as i32;
    // The head: the settings in force, then the window's times.
    let head = if w.settings.is_empty() {
        "this run".to_string()
    } else {
        w.settings.clone()
    };
    area.draw(&Text::new(
        head.clone(),
        (margin, px(4.0) as i32),
        ("sans-serif", px(head_font))
            .into_font()
            .style(FontStyle::Bold)
            .color(&BLACK),
    ))?;
    // The times at the right of the head where they fit beside it, else
    // under it.
    let times = format!("{:.3}-{}", w.from as f64 / 1e9, secs(w.to));
    let beside =
        text_w(head.len(), px(head_font)) + text_w(times.len(), px(text_font)) + px(12.0) as i32
            <= aw as i32 - 2 * margin;
    let (tx, ty, hpos) = if beside {
        (
            aw as i32 - margin,
            px(4.0) as i32 + px(3.0) as i32,
            HPos::Right,
        )
    } else {
        (margin, px(4.0) as i32 + line_h + px(4.0) as i32, HPos::Left)
    };
    area.draw(&Text::new(
        times,
        (tx, ty),
        sc.font(text_font)
            .color(&DIM)
            .pos(Pos::new(hpos, VPos::Top)),
    ))?;
    let head_lines = if beside { 1 } else { 2 };
    let head_h = px(4.0) as i32 + head_lines * line_h + px(10.0) as i32;
    // What it holds, wrapped at the column's width.
    let max_chars =
        (f64::from(aw) - f64::from(2 * margin)) / (0.6 * f64::from(px(text_font)) / 1.24);
    let summary: Vec<String> = w
        .summary(metric)
        .iter()
        .flat_map(|l| super::plot::wrap(l, max_chars.max(10.0) as usize))
        .collect();
    let axis_h = px(34.0) as i32;
    let sum_h = line_h * summary.len() as i32 + px(6.0) as i32;
    let lanes_h = ah as i32 - head_h - axis_h - sum_h;
    let label_w = text_w(9, px(text_font)) + px(6.0) as i32;
    let x0 = margin + label_w;
    let x1 = aw as i32 - margin;
    let ncols = (x1 - x0).max(1) as usize;
    let per = ((w.to - w.from) / ncols as u64).max(1);
    // A reader's lane is 0.6 of a CPU's (a bar and a line).
    let weight = (cpus as f64 + 0.6 * readers as f64).max(1.0);
    let lane_h = ((f64::from(lanes_h) / weight) as i32).clamp(1, px(60.0) as i32);
    let reader_h = lane_h * 6 / 10;
    let y0 = head_h;
    let label_font = (f64::from(px(text_font))).min(f64::from(lane_h) * 0.8) as u32;

    // The CPU lanes.
    let mut lanes: Vec<Columns> = (0..cpus).map(|_| Columns::new(ncols)).collect();
    let rdrs = w.readers();
    let mut asleep: Vec<Vec<u64>> = vec![vec![0; ncols]; rdrs.len()];
    for s in &w.spans {
        match s.kind {
            SpanKind::Sleep => {
                if let Some(i) = rdrs.iter().position(|(t, _)| *t == s.tid) {
                    fill(w.from, per, ncols, s.start_ns, s.end_ns, |c, ns| {
                        asleep[i][c] += ns
                    });
                }
            }
            SpanKind::Hog => {
                if let Some(l) = lanes.get_mut(s.cpu as usize) {
                    fill(w.from, per, ncols, s.start_ns, s.end_ns, |c, ns| {
                        l.hog[c] += ns
                    });
                }
            }
            k => {
                if let Some(l) = lanes.get_mut(s.cpu as usize) {
                    fill(w.from, per, ncols, s.start_ns, s.end_ns, |c, ns| {
                        l.items[c][k as usize] += ns
                    });
                    if s.start_ns > s.queued_ns {
                        fill(w.from, per, ncols, s.queued_ns, s.start_ns, |c, ns| {
                            l.wait[c][k as usize] += ns
                        });
                    }
                }
            }
        }
    }
    let bar_h = lane_h * 7 / 10;
    let strip = (lane_h * 2 / 10).max(1);
    // A label at the middle of a lane's bar (`mid`).
    let label = |mid: i32, text: String| -> Result<(), DrawError> {
        area.draw(&Text::new(
            text,
            (margin, mid),
            ("sans-serif", label_font)
                .into_font()
                .color(&BLACK)
                .pos(Pos::new(HPos::Left, VPos::Center)),
        ))
    };
    for (i, l) in lanes.iter().enumerate() {
        let top = y0 + lane_h * i as i32;
        let base = top + bar_h;
        label(top + bar_h / 2, format!("CPU {i}"))?;
        area.draw(&PathElement::new(
            vec![(x0, base), (x1, base)],
            GRID.stroke_width(1),
        ))?;
        let bar = |r: &Run| {
            let h = (bar_h * r.3 as i32 / 8).max(1);
            Rectangle::new(
                [(x0 + r.0 as i32, base - h), (x0 + (r.0 + r.1) as i32, base)],
                r.2.filled(),
            )
        };
        for r in runs(ncols, |c| {
            (l.hog[c] > 0).then(|| (HOG, eighths(l.hog[c], per)))
        }) {
            area.draw(&bar(&r))?;
        }
        let dominant = |v: &[u64; 3]| (0..3).max_by_key(|&k| v[k]).unwrap_or(0);
        for r in runs(ncols, |c| {
            let it = &l.items[c];
            let busy: u64 = it.iter().sum();
            (busy > 0).then(|| (color(SpanKind::ALL[dominant(it)]), eighths(busy, per)))
        }) {
            area.draw(&bar(&r))?;
        }
        for r in runs(ncols, |c| {
            let wt = &l.wait[c];
            (wt.iter().sum::<u64>() > 0)
                .then(|| (pale(color(SpanKind::ALL[dominant(wt)]), 0.55), 8))
        }) {
            area.draw(&Rectangle::new(
                [
                    (x0 + r.0 as i32, base + 1),
                    (x0 + (r.0 + r.1) as i32, base + strip),
                ],
                r.2.filled(),
            ))?;
        }
    }
    // The readers' lanes: busy as a bar, asleep in their wait as a line.
    for (j, (_, name)) in rdrs.iter().enumerate() {
        let top = y0 + lane_h * cpus as i32 + reader_h * j as i32;
        let mid = top + reader_h / 2;
        let shown: String = name.chars().take(10).collect();
        label(mid, shown)?;
        area.draw(&PathElement::new(
            vec![(x0, mid), (x1, mid)],
            ASLEEP.stroke_width(px(1.0)),
        ))?;
        for r in runs(ncols, |c| (asleep[j][c] * 2 < per).then_some((READER, 8))) {
            area.draw(&Rectangle::new(
                [
                    (x0 + r.0 as i32, mid - reader_h / 4),
                    (x0 + (r.0 + r.1) as i32, mid + reader_h / 4),
                ],
                READER.filled(),
            ))?;
        }
    }
    let lanes_end = y0 + lane_h * cpus as i32 + reader_h * rdrs.len() as i32;
    // The time axis: ticks from the window's start.
    let axis_y = lanes_end + px(4.0) as i32;
    area.draw(&PathElement::new(
        vec![(x0, axis_y), (x1, axis_y)],
        BLACK.stroke_width(px(1.0)),
    ))?;
    let len_ms = (w.to - w.from) as f64 / 1e6;
    let step = tick_step(len_ms);
    let mut t = 0.0;
    while t <= len_ms + 1e-9 {
        let x = x0 + ((t / len_ms) * f64::from(x1 - x0)).round() as i32;
        area.draw(&PathElement::new(
            vec![(x, axis_y), (x, axis_y + px(5.0) as i32)],
            BLACK.stroke_width(px(1.0)),
        ))?;
        let last = t + step > len_ms + 1e-9;
        let text = if last {
            format!("{} ms", super::plot::fmt_tick(t))
        } else {
            super::plot::fmt_tick(t)
        };
        let hpos = if t == 0.0 {
            HPos::Left
        } else if last {
            HPos::Right
        } else {
            HPos::Center
        };
        area.draw(&Text::new(
            text,
            (x, axis_y + px(7.0) as i32),
            sc.font(text_font).pos(Pos::new(hpos, VPos::Top)),
        ))?;
        t += step;
    }
    // The longest wait: an arrow from its queueing (on the CPU that
    // queued it) to its start (on the CPU it ran on).
    if let Some(s) = w.longest_wait().filter(|s| s.wait_ns() > 0) {
        let x_of = |t: u64| {
            x0 + ((t.clamp(w.from, w.to) - w.from) as f64 / (w.to - w.from) as f64
                * f64::from(x1 - x0))
            .round() as i32
        };
        let y_of = |cpu: u16| y0 + lane_h * i32::from(cpu) + bar_h / 2;
        let (qx, qy) = (x_of(s.queued_ns), y_of(s.queued_cpu));
        let (sx, sy) = (x_of(s.start_ns), y_of(s.cpu));
        let style = MARK.stroke_width(px(2.0));
        area.draw(&Circle::new((qx, qy), px(3.0) as i32, MARK.filled()))?;
        area.draw(&PathElement::new(vec![(qx, qy), (sx, sy)], style))?;
        let d = px(6.0) as i32;
        area.draw(&Polygon::new(
            vec![(sx, sy), (sx - d, sy - d / 2), (sx - d, sy + d / 2)],
            MARK.filled(),
        ))?;
    }
    // What it holds, in words.
    let sum_y = axis_y + axis_h - px(4.0) as i32;
    for (i, l) in summary.iter().enumerate() {
        area.draw(&Text::new(
            l.clone(),
            (margin, sum_y + line_h * i as i32),
            sc.font(text_font),
        ))?;
    }
    Ok(())
}

/// A tick step for a window of `len_ms`: about five ticks.
fn tick_step(len_ms: f64) -> f64 {
    let raw = len_ms / 5.0;
    let p = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * p)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_fill_by_eighths_and_alike_columns_merge() {
        assert_eq!(eighths(0, 10), 0);
        assert_eq!(eighths(1, 1000), 1, "a sliver at least");
        assert_eq!(eighths(10, 10), 8);
        assert_eq!(eighths(5, 10), 4);
        let r = runs(6, |c| {
            (c != 2).then_some((DECRYPT, if c < 4 { 8 } else { 3 }))
        });
        assert_eq!(
            r,
            vec![(0, 2, DECRYPT, 8), (3, 1, DECRYPT, 8), (4, 2, DECRYPT, 3)]
        );
    }

    #[test]
    fn the_legend_says_the_colours_the_lanes_draw() {
        assert_eq!(LEGEND[4].0, pale(VERIFY, 0.55), "a verify item's wait");
        assert_eq!(LEGEND[0].0, color(SpanKind::Decrypt));
        assert_eq!(LEGEND[1].0, color(SpanKind::Verify));
        assert_eq!(LEGEND[2].0, color(SpanKind::DecryptVerify));
        assert_eq!(LEGEND[3].0, color(SpanKind::Hog));
    }

    #[test]
    fn ticks_are_round() {
        assert_eq!(tick_step(200.0), 50.0);
        assert_eq!(tick_step(20.0), 5.0);
        assert_eq!(tick_step(1000.0), 200.0);
        assert_eq!(tick_step(1.0), 0.2);
    }
}
