//! Charts for slides from a recording: latency percentiles (log axis),
//! throughput and scheduler latency over time, with every change marked and
//! labelled, as an SVG (plotters' SVG backend: text stays text, no fonts
//! needed); and the same series as CSV for a spreadsheet or gnuplot.

use std::fmt::Write as _;

use plotters::prelude::*;

use crate::metrics::IntervalRecord;
use crate::output::recording::Recording;

/// One chart panel's series: (name, value per record).
type Getter = fn(&IntervalRecord) -> f64;

/// A panel: title, unit, log axis, series.
type Panel = (
    &'static str,
    &'static str,
    bool,
    &'static [(&'static str, Getter)],
);

const PANELS: &[Panel] = &[
    (
        "latency (us, log)",
        "us",
        true,
        &[
            ("p50", |r| r.latency_us.p50),
            ("p99", |r| r.latency_us.p99),
            ("p99.9", |r| r.latency_us.p999),
        ],
    ),
    (
        "throughput (MiB/s)",
        "MiB/s",
        false,
        &[("MiB/s", |r| r.throughput_mib_s)],
    ),
    (
        "scheduler latency",
        "us",
        false,
        &[
            ("queue p99 (us)", |r| r.stages_us.queue.p99),
            ("run_delay (ms/s)", |r| {
                r.workers.run_delay_us / r.interval_s.max(1e-9) / 1e3
            }),
        ],
    ),
];

/// The recording's series as CSV: one row per interval.
pub fn csv(rec: &Recording) -> String {
    let mut out = String::from(
        "t_s,throughput_mib_s,iops,p50_us,p99_us,p999_us,queue_p99_us,run_delay_ms_per_s,events\n",
    );
    for r in rec.records.iter().filter(|r| !r.paused) {
        let events: Vec<&str> = r.events.iter().map(|e| e.label.as_str()).collect();
        let _ = writeln!(
            out,
            "{:.3},{:.3},{:.1},{:.3},{:.3},{:.3},{:.3},{:.3},\"{}\"",
            r.t_s,
            r.throughput_mib_s,
            r.iops,
            r.latency_us.p50,
            r.latency_us.p99,
            r.latency_us.p999,
            r.stages_us.queue.p99,
            r.workers.run_delay_us / r.interval_s.max(1e-9) / 1e3,
            events.join("; ").replace('"', "'")
        );
    }
    out
}

/// The panels `--metric` can name, in drawing order.
pub const METRIC_NAMES: [&str; 3] = ["latency", "throughput", "sched"];

/// Draws the chosen panels (indexes into [`METRIC_NAMES`]; all when empty)
/// as an SVG document of `width` x `height` pixels.
pub fn svg(rec: &Recording, width: u32, height: u32, metrics: &[usize]) -> Result<String, String> {
    let panels: Vec<&Panel> = PANELS
        .iter()
        .enumerate()
        .filter(|(i, _)| metrics.is_empty() || metrics.contains(i))
        .map(|(_, p)| p)
        .collect();
    let records: Vec<&IntervalRecord> = rec.records.iter().filter(|r| !r.paused).collect();
    if records.is_empty() {
        return Err("the recording holds no measured interval".into());
    }
    let t0 = rec.records.first().map_or(0.0, |r| r.t_s - r.interval_s);
    let t1 = rec.records.last().map_or(1.0, |r| r.t_s).max(t0 + 1e-3);
    // Captions are numbered on the charts and written out below them.
    let mut captions: Vec<(f64, String)> = Vec::new();
    let markers: Vec<(f64, String)> = rec
        .records
        .iter()
        .flat_map(|r| r.events.iter())
        .map(|e| match e.label.strip_prefix("caption: ") {
            Some(c) => {
                captions.push((e.t_s, c.to_string()));
                (e.t_s, format!("[{}]", captions.len()))
            }
            None => (e.t_s, e.label.clone()),
        })
        .collect();
    let mut doc = String::new();
    {
        let root = SVGBackend::with_string(&mut doc, (width, height)).into_drawing_area();
        let e = |e: &dyn std::fmt::Display| e.to_string();
        root.fill(&WHITE).map_err(|x| e(&x))?;
        let title = match &rec.header.preset {
            Some(p) => format!("readpath: {p}"),
            None => "readpath".to_string(),
        };
        let (top, rest) = root.split_vertically(30);
        top.titled(&title, ("sans-serif", 22)).map_err(|x| e(&x))?;
        let caption_h = 16 * captions.len() as u32 + if captions.is_empty() { 0 } else { 8 };
        let (rest, bottom) = rest.split_vertically(height.saturating_sub(30 + caption_h));
        for (i, (t, c)) in captions.iter().enumerate() {
            bottom
                .draw(&Text::new(
                    format!("[{}] {:.0} s: {c}", i + 1, t),
                    (12, 4 + 16 * i as i32),
                    ("sans-serif", 13).into_font().color(&BLACK),
                ))
                .map_err(|x| e(&x))?;
        }
        let areas = rest.split_evenly((panels.len(), 1));
        let colors = [
            RGBColor(0, 140, 60),
            RGBColor(220, 140, 0),
            RGBColor(210, 40, 40),
        ];
        for (area, (name, _unit, log, series)) in areas.iter().zip(panels) {
            let values: Vec<f64> = records
                .iter()
                .flat_map(|r| series.iter().map(move |(_, g)| g(r)))
                .filter(|v| v.is_finite())
                .collect();
            let max = values.iter().copied().fold(0.0, f64::max).max(1e-3);
            let mut chart = ChartBuilder::on(area);
            chart
                .caption(*name, ("sans-serif", 16))
                .margin(8)
                .x_label_area_size(28)
                .y_label_area_size(60);
            let draw_markers = |dc: &DrawingArea<SVGBackend, plotters::coord::Shift>,
                                to_x: &dyn Fn(f64) -> i32,
                                plot_top: i32|
             -> Result<(), String> {
                let base_x = dc.get_base_pixel().0;
                for (i, (t, label)) in markers.iter().enumerate() {
                    let x = to_x(*t) - base_x;
                    dc.draw(&Text::new(
                        crate::output::format::short_label(label),
                        (x + 3, plot_top + 2 + (i % 3) as i32 * 13),
                        ("sans-serif", 11).into_font().color(&MAGENTA),
                    ))
                    .map_err(|x| e(&x))?;
                }
                Ok(())
            };
            // The markers, the series with their legend and the marker labels of
            // one panel, on a log or a linear y axis (two coordinate types, one
            // drawing).
            macro_rules! lines {
                ($c:ident, $g:ident, $lo:expr, $hi:expr, $points:expr) => {
                    for (t, _) in &markers {
                        $c.draw_series(LineSeries::new(
                            [(*t, $lo), (*t, $hi)],
                            MAGENTA.stroke_width(1),
                        ))
                        .map_err(|x| e(&x))?;
                    }
                    for ((sname, $g), color) in series.iter().zip(colors) {
                        $c.draw_series(LineSeries::new($points, color.stroke_width(2)))
                            .map_err(|x| e(&x))?
                            .label(*sname)
                            .legend(move |(x, y)| {
                                PathElement::new([(x, y), (x + 16, y)], color.stroke_width(2))
                            });
                    }
                    $c.configure_series_labels()
                        .background_style(WHITE.mix(0.8))
                        .border_style(BLACK)
                        .position(SeriesLabelPosition::UpperLeft)
                        .draw()
                        .map_err(|x| e(&x))?;
                    let top_px = $c.plotting_area().get_pixel_range().1.start;
                    let to_x = |t: f64| $c.backend_coord(&(t, $lo)).0;
                    draw_markers(area, &to_x, top_px - area.get_base_pixel().1)?;
                };
            }
            if *log {
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
                let hi = 10f64.powf(max.log10().ceil()).max(lo * 10.0);
                let mut c = chart
                    .build_cartesian_2d(t0..t1, (lo..hi).log_scale())
                    .map_err(|x| e(&x))?;
                c.configure_mesh()
                    .x_desc("seconds")
                    .y_label_formatter(&|v| crate::output::format::fmt_us(*v))
                    .draw()
                    .map_err(|x| e(&x))?;
                // An interval with no completed read has no latency.
                lines!(
                    c,
                    g,
                    lo,
                    hi,
                    records
                        .iter()
                        .filter(|r| r.reads > 0)
                        .map(|r| (r.t_s, g(r).max(lo)))
                );
            } else {
                let hi = max * 1.1;
                let mut c = chart
                    .build_cartesian_2d(t0..t1, 0.0..hi)
                    .map_err(|x| e(&x))?;
                c.configure_mesh()
                    .x_desc("seconds")
                    .draw()
                    .map_err(|x| e(&x))?;
                lines!(c, g, 0.0, hi, records.iter().map(|r| (r.t_s, g(r))));
            }
        }
        root.present().map_err(|x| e(&x))?;
    }
    Ok(doc)
}

/// Turns an SVG document into a PNG of exactly `width` x `height` with
/// `rsvg-convert` (Debian: librsvg2-bin), through its stdin and stdout: no
/// temporary file; the caller writes the bytes (atomically).
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
    // Fed from a thread so a large PNG on stdout cannot deadlock the pipe.
    let feeder = std::thread::spawn(move || stdin.write_all(&svg));
    let out = child.wait_with_output()?;
    let fed = feeder
        .join()
        .map_err(|_| anyhow::anyhow!("feeding rsvg-convert"))?;
    if !out.status.success() {
        anyhow::bail!(
            "rsvg-convert failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    fed?;
    Ok(out.stdout)
}
