//! `readpath plot`: a recording charted for slides (SVG, or PNG through
//! librsvg) or its series exported (CSV, or its latency histograms as an
//! HdrHistogram interval log), the output checked before the recording is
//! read.

use std::path::Path;

use anyhow::{Context, Result};

use crate::cli::PlotFormat;
use crate::invocation::{BadInput, bad_input};

use super::outputs::{check_output, output_error, print_text, recording_error};

/// `readpath plot FILE --out OUT`: `metric` names the charts (none: all),
/// drawn as `look` says.
/// With `lanes` (`--timeline`), where each work item ran instead.
pub(super) fn plot(
    file: &Path,
    out: &Path,
    (format, size): (PlotFormat, (u32, u32)),
    metric: &[String],
    look: crate::output::plot::Look,
    lanes: Option<crate::output::lanes::Ask>,
) -> Result<()> {
    if let Some(ask) = lanes {
        return draw_lanes(file, out, (format, size), &ask, look);
    }
    let metrics = crate::output::plot::metric_panels(metric).map_err(bad_input)?;
    draw(file, out, format, size, &metrics, look)
}

/// `plot --timeline`: the lanes of one window or two, as SVG or PNG.
fn draw_lanes(
    file: &Path,
    out: &Path,
    (format, size): (PlotFormat, (u32, u32)),
    ask: &crate::output::lanes::Ask,
    look: crate::output::plot::Look,
) -> Result<()> {
    use crate::output::lanes::MAX_WINDOWS;
    if format != PlotFormat::Svg {
        return Err(BadInput(
            "--timeline draws a picture (an .svg or .png --out); --format csv and hlog export the charts' series".into(),
        )
        .into());
    }
    if ask.at_ns.len() > MAX_WINDOWS {
        return Err(BadInput(format!(
            "--at: {} times; allowed 1 or {MAX_WINDOWS} (windows side by side)",
            ask.at_ns.len()
        ))
        .into());
    }
    let target = check_output("--out", out, &[file.to_path_buf()], None)?;
    let png = picture_kind(out, &target, "")?;
    if sweep_report(file)?.is_some() {
        return Err(BadInput(format!(
            "{}: a sweep report holds no spans; --timeline draws a recording's (`run --record FILE --timeline`)",
            file.display()
        ))
        .into());
    }
    let rec = crate::output::recording::read(file).map_err(recording_error)?;
    let drawn = crate::output::lanes::svg(&rec, ask, size.0, size.1, look)
        .map_err(|e| BadInput(format!("{}: {e}", file.display())))?;
    let (bytes, kind) = if png {
        (
            crate::output::plot::rasterize(drawn.svg.as_bytes(), size.0, size.1)
                .with_context(|| format!("--out {}", out.display()))?,
            "PNG",
        )
    } else {
        (drawn.svg.into_bytes(), "SVG")
    };
    write_out(
        &target,
        out,
        bytes,
        format!("{kind} {}x{}, timeline: {}", size.0, size.1, drawn.windows),
    )
}

/// Whether `out` asks for a PNG; an error for a regular file named
/// neither .svg nor .png (`or` adds what else it may be).
fn picture_kind(out: &Path, target: &crate::files::OutputPath, or: &str) -> Result<bool> {
    let ext = out.extension().and_then(|e| e.to_str()).unwrap_or("");
    if target.mode() == crate::files::Mode::Atomic && !matches!(ext, "svg" | "png") {
        return Err(BadInput(format!(
            "--out {}: give a file name ending in .svg or .png{or}",
            out.display()
        ))
        .into());
    }
    Ok(ext == "png")
}

/// Writes the charts (`metrics`: the panels' indices) or the series.
fn draw(
    file: &Path,
    out: &Path,
    format: PlotFormat,
    size: (u32, u32),
    metrics: &[usize],
    look: crate::output::plot::Look,
) -> Result<()> {
    // The output is checked (not the input, not a device) before the input
    // is read, so a refusal costs nothing.
    let target = check_output("--out", out, &[file.to_path_buf()], None)?;
    if format == PlotFormat::Svg {
        picture_kind(out, &target, " (or --format csv)")?;
    }
    // What is drawn: a sweep report's heat map, or a recording's charts
    // (or its series as CSV); then written and said alike.
    let sweep = sweep_report(file)?;
    if sweep.is_some() && format != PlotFormat::Svg {
        return Err(BadInput(format!(
            "{}: a sweep report: plot draws it as a heat map (SVG or PNG); its numbers are in the JSON",
            file.display()
        ))
        .into());
    }
    let png = out.extension().is_some_and(|e| e == "png");
    let (svg, from) = match &sweep {
        Some(r) => (
            crate::output::heatmap::svg(r, size.0, size.1)
                .map_err(crate::output::plot::PlotError::from),
            "sweep heat map".to_string(),
        ),
        None => {
            let rec = crate::output::recording::read(file).map_err(recording_error)?;
            match format {
                PlotFormat::Csv => {
                    let csv = crate::output::plot::csv(&rec);
                    return write_out(&target, out, csv.into_bytes(), "CSV".into());
                }
                PlotFormat::Hlog => {
                    let log = crate::output::recording::interval_log(&rec);
                    let what = format!(
                        "HdrHistogram interval log, {} intervals x 2 histograms",
                        rec.records.len()
                    );
                    return write_out(&target, out, log.into_bytes(), what);
                }
                PlotFormat::Svg => (
                    crate::output::plot::svg(&rec, size.0, size.1, metrics, look),
                    format!("from {} intervals", rec.records.len()),
                ),
            }
        }
    };
    let svg = svg.map_err(|e| BadInput(format!("{}: {e}", file.display())))?;
    let (bytes, kind) = if png {
        // Drawn as SVG, rasterised by librsvg (text stays sharp).
        (
            crate::output::plot::rasterize(svg.as_bytes(), size.0, size.1)
                .with_context(|| format!("--out {}", out.display()))?,
            "PNG",
        )
    } else {
        (svg.into_bytes(), "SVG")
    };
    write_out(
        &target,
        out,
        bytes,
        format!("{kind} {}x{}, {from}", size.0, size.1),
    )
}

/// Writes `bytes` to the checked output and says what it wrote (`what`),
/// nothing when the output is stdout. A FIFO waits for its reader here
/// (said on stderr; a stop signal ends the wait); stdout and a FIFO are
/// written through poll.
fn write_out(
    target: &crate::files::OutputPath,
    out: &Path,
    bytes: Vec<u8>,
    what: String,
) -> Result<()> {
    target.write_all(&bytes).map_err(output_error)?;
    if out != Path::new("-") {
        print_text(&format!(
            "readpath plot: wrote {} ({what}, {} bytes)\n",
            out.display(),
            bytes.len()
        ))?;
    }
    Ok(())
}

/// The most bytes of a sweep report read.
const MAX_SWEEP_BYTES: u64 = 32 << 20;

/// `file` as a sweep report when it is a regular file whose JSON says
/// `"kind": "sweep"`; None for anything else (a recording, a FIFO).
pub(super) fn sweep_report(file: &Path) -> Result<Option<crate::output::sweep::SweepReport>> {
    let regular = std::fs::metadata(file).is_ok_and(|m| m.is_file());
    if !regular {
        return Ok(None);
    }
    // A recording's first line is its header; a sweep report one object.
    // Opened as every input is (non-blocking, a file of /proc refused):
    // a regular file that blocks must not hold readpath here.
    let shown = crate::sys::printable(&file.display().to_string(), false);
    let mut head = [0u8; 4096];
    let n = {
        use std::io::Read as _;
        let mut f = crate::files::open_input(file)
            .map_err(|e| BadInput(format!("{shown}: {}", crate::files::plain(&e))))?;
        f.read(&mut head)
            .with_context(|| format!("{shown}: reading its first bytes"))?
    };
    let head = String::from_utf8_lossy(&head[..n]);
    if !head.contains("\"kind\": \"sweep\"") && !head.contains("\"kind\":\"sweep\"") {
        return Ok(None);
    }
    let text = crate::files::read_capped(file, MAX_SWEEP_BYTES).map_err(bad_input)?;
    crate::output::sweep::parse(&text)
        .map(Some)
        .map_err(|e| BadInput(format!("{}: {e}", file.display())).into())
}
