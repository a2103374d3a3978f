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

/// The median of `values` (NaN when empty).
fn median(mut values: Vec<f64>) -> f64 {
    values.retain(|v| v.is_finite());
    if values.is_empty() {
        return f64::NAN;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

/// A value with its unit, as a slide says it: latencies in s, ms or us
/// (`1.03 s`, `190 ms`, `84 us`), run_delay per second in ms/s, rates
/// plain.
fn say(v: f64, unit: &str) -> String {
    match unit {
        "us" if v >= 1e6 => format!("{:.2} s", v / 1e6),
        "us" if v >= 1e3 => format!("{:.1} ms", v / 1e3),
        "us" => format!("{v:.0} us"),
        "ms/s" if v >= 10.0 => format!("{v:.0} ms/s"),
        "ms/s" => format!("{v:.2} ms/s"),
        _ => format!("{v:.1} {unit}"),
    }
}

/// Draws the chosen panels (indexes into [`METRIC_NAMES`]; all when empty,
/// leaving out the scheduler chart when nothing in it was measured) as an
/// SVG document of `width` x `height` pixels, fonts scaled to the size;
/// with `captions`, the demo's captions numbered on the charts and listed
/// below. Each settings phase's median is drawn as a dashed segment and
/// the change from the first phase to the last is written on the chart.
pub fn svg(
    rec: &Recording,
    width: u32,
    height: u32,
    metrics: &[usize],
    captions_on: bool,
) -> Result<String, String> {
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
        return Err("the recording holds no measured interval".into());
    }
    let sched_measured = records
        .iter()
        .any(|r| r.stages_us.queue.p99 > 0.0 || r.workers.run_delay_us > 0.0);
    let panels: Vec<&Panel> = PANELS
        .iter()
        .enumerate()
        .filter(|(i, _)| {
            if metrics.is_empty() {
                *i != 2 || sched_measured
            } else {
                metrics.contains(i)
            }
        })
        .map(|(_, p)| p)
        .collect();
    // Fonts and margins grow with the image (1200x900 is 1x).
    let k = (f64::from(width) / 1200.0)
        .min(f64::from(height) / 900.0)
        .clamp(0.9, 4.0);
    let px = |n: f64| (n * k).round().max(1.0) as u32;
    let phases = phase_starts(rec);
    let t0 = rec.records.first().map_or(0.0, |r| r.t_s - r.interval_s);
    let t1 = rec.records.last().map_or(1.0, |r| r.t_s).max(t0 + 1e-3);
    // Captions are numbered on the charts and written out below them.
    let mut captions: Vec<(f64, String)> = Vec::new();
    let markers: Vec<(f64, String)> = rec
        .records
        .iter()
        .flat_map(|r| r.events.iter())
        .filter_map(|e| match e.label.strip_prefix("caption: ") {
            Some(_) if !captions_on => None,
            Some(c) => {
                captions.push((e.t_s, c.to_string()));
                Some((e.t_s, format!("[{}]", captions.len())))
            }
            None => Some((e.t_s, e.label.clone())),
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
        let (top, rest) = root.split_vertically(px(30.0));
        top.titled(&title, ("sans-serif", px(22.0)))
            .map_err(|x| e(&x))?;
        let line_h = px(16.0);
        let caption_h =
            line_h * captions.len() as u32 + if captions.is_empty() { 0 } else { px(8.0) };
        let (rest, bottom) = rest.split_vertically(height.saturating_sub(px(30.0) + caption_h));
        for (i, (t, c)) in captions.iter().enumerate() {
            bottom
                .draw(&Text::new(
                    format!("[{}] {:.0} s: {c}", i + 1, t),
                    (px(12.0) as i32, px(4.0) as i32 + (line_h * i as u32) as i32),
                    ("sans-serif", px(13.0)).into_font().color(&BLACK),
                ))
                .map_err(|x| e(&x))?;
        }
        let areas = rest.split_evenly((panels.len(), 1));
        let colors = [
            RGBColor(0, 140, 60),
            RGBColor(220, 140, 0),
            RGBColor(210, 40, 40),
        ];
        for (area, (name, unit, log, series)) in areas.iter().zip(panels) {
            // Each series' median per settings phase, and what changed from
            // the first phase to the last, said on the chart.
            let bounds: Vec<f64> = std::iter::once(t0)
                .chain(phases.iter().map(|p| p.0))
                .chain(std::iter::once(t1))
                .collect();
            let phase_medians: Vec<Vec<(f64, f64, f64)>> = series
                .iter()
                .map(|(_, g)| {
                    bounds
                        .windows(2)
                        .map(|w| {
                            let m = median(
                                records
                                    .iter()
                                    .filter(|r| r.t_s - r.interval_s >= w[0] && r.t_s <= w[1])
                                    .filter(|r| r.reads > 0)
                                    .map(|r| g(r))
                                    .collect(),
                            );
                            (w[0], w[1], m)
                        })
                        .collect()
                })
                .collect();
            let results: Vec<String> = if phases.is_empty() {
                Vec::new()
            } else {
                series
                    .iter()
                    .zip(&phase_medians)
                    .filter_map(|((sname, _), ms)| {
                        let a = ms.iter().map(|m| m.2).find(|v| v.is_finite())?;
                        let b = ms.iter().rev().map(|m| m.2).find(|v| v.is_finite())?;
                        let pct = if a != 0.0 { (b - a) / a * 100.0 } else { 0.0 };
                        let what = sname.split(" (").next().unwrap_or(sname);
                        let u = if sname.contains("ms/s") {
                            "ms/s"
                        } else {
                            *unit
                        };
                        Some(format!("{what} {} -> {}, {pct:+.0}%", say(a, u), say(b, u)))
                    })
                    .collect()
            };
            let values: Vec<f64> = records
                .iter()
                .flat_map(|r| series.iter().map(move |(_, g)| g(r)))
                .filter(|v| v.is_finite())
                .collect();
            let max = values.iter().copied().fold(0.0, f64::max).max(1e-3);
            let mut chart = ChartBuilder::on(area);
            chart
                .caption(*name, ("sans-serif", px(16.0)))
                .margin(px(8.0))
                .x_label_area_size(px(28.0))
                .y_label_area_size(px(60.0));
            let draw_markers = |dc: &DrawingArea<SVGBackend, plotters::coord::Shift>,
                                to_x: &dyn Fn(f64) -> i32,
                                plot_top: i32|
             -> Result<(), String> {
                let base_x = dc.get_base_pixel().0;
                // A label never sits on the y axis: at least a few pixels in.
                let left = to_x(t0) - base_x + px(4.0) as i32;
                for (i, (t, label)) in markers.iter().enumerate() {
                    let x = (to_x(*t) - base_x + 3).max(left);
                    dc.draw(&Text::new(
                        crate::output::format::short_label(label),
                        (x, plot_top + 2 + (i % 3) as i32 * px(13.0) as i32),
                        ("sans-serif", px(11.0)).into_font().color(&MAGENTA),
                    ))
                    .map_err(|x| e(&x))?;
                }
                // The result, top right, one line per series.
                let right = to_x(t1) - base_x;
                for (i, text) in results.iter().enumerate() {
                    let w = (text.len() as f64 * 7.0 * k) as i32;
                    let (x, y) = (
                        right - w - px(6.0) as i32,
                        plot_top + px(4.0) as i32 + i as i32 * px(17.0) as i32,
                    );
                    // On a light ground, so a curve under it does not hide it.
                    dc.draw(&Rectangle::new(
                        [(x - 3, y - 1), (x + w + 3, y + px(16.0) as i32)],
                        WHITE.mix(0.85).filled(),
                    ))
                    .map_err(|x| e(&x))?;
                    dc.draw(&Text::new(
                        text.clone(),
                        (x, y),
                        ("sans-serif", px(14.0)).into_font().color(&BLACK),
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
                    // Each phase's median, dashed, between its markers.
                    for (ms, color) in phase_medians.iter().zip(colors) {
                        for &(a, b, m) in ms.iter().filter(|m| m.2.is_finite() && phases.len() > 0)
                        {
                            let y = if $lo > 0.0 { m.max($lo) } else { m };
                            $c.draw_series(DashedLineSeries::new(
                                [(a, y), (b, y)],
                                px(6.0),
                                px(4.0),
                                color.mix(0.7).stroke_width(px(2.0)),
                            ))
                            .map_err(|x| e(&x))?;
                        }
                    }
                    for ((sname, $g), color) in series.iter().zip(colors) {
                        $c.draw_series(LineSeries::new($points, color.stroke_width(px(2.0))))
                            .map_err(|x| e(&x))?
                            .label(*sname)
                            .legend(move |(x, y)| {
                                PathElement::new([(x, y), (x + 16, y)], color.stroke_width(2))
                            });
                    }
                    $c.configure_series_labels()
                        .label_font(("sans-serif", px(13.0)))
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
                    .label_style(("sans-serif", px(12.0)))
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
                    .label_style(("sans-serif", px(12.0)))
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
