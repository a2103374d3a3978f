//! A sweep as a heat map for slides (`readpath plot SWEEP.json`): one cell
//! per point of the grid, the change written in it (so the colour is never
//! the only carrier of the number), the colour saying which way it went
//! against the published result (green: its sign, red: the opposite), a
//! cell whose rounds' ranges overlap grey and hatched: no direction can be
//! read into it, and a cell whose ranges lie apart in too few rounds for a
//! finding (a chance by noise of 5% or more: `?`) grey. Under the map, the published result, the machine and
//! the computed summary of where the sign holds and where it flips.

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::output::plot::DrawError;
use crate::output::sweep::{SweepPoint, SweepReport};
use crate::output::verdict::Kind;

const GREEN: RGBColor = RGBColor(20, 140, 70);
const RED: RGBColor = RGBColor(200, 45, 45);
const BLUE: RGBColor = RGBColor(40, 90, 200);
const ORANGE: RGBColor = RGBColor(220, 130, 0);
const GREY: RGBColor = RGBColor(200, 200, 200);

/// A cell's fill: the verdict's colour, paler for a smaller change (a
/// log scale: 1% pale, 100% and more full), grey for noise or nothing.
fn fill(p: &SweepPoint, published: bool) -> RGBColor {
    let Some(c) = p.verdict.change_pct else {
        return RGBColor(240, 240, 240);
    };
    let base = match p.verdict.kind {
        Kind::Reproduced if !p.verdict.overlap => GREEN,
        Kind::NotReproduced => RED,
        Kind::Apart | Kind::NoSpread if !published => {
            if c < 0.0 {
                BLUE
            } else {
                ORANGE
            }
        }
        Kind::NoSpread => GREY,
        _ => return GREY,
    };
    let strength = ((c.abs().max(1.0)).log10() / 2.0).clamp(0.25, 1.0);
    let mix = |v: u8| (255.0 - (255.0 - f64::from(v)) * strength) as u8;
    RGBColor(mix(base.0), mix(base.1), mix(base.2))
}

/// The map as an SVG document of `width` x `height`.
pub fn svg(r: &SweepReport, width: u32, height: u32) -> Result<String, DrawError> {
    let scale = (f64::from(width) / 1600.0).min(f64::from(height) / 1000.0);
    let px = |n: f64| ((n * scale).round() as u32).max(1);
    let metric = r.metric().map_or(r.metric.as_str(), |m| m.label);
    let (a, b) = (
        r.compare.values.first().map_or("", String::as_str),
        r.compare.values.get(1).map_or("", String::as_str),
    );
    let (rows, cols, cells) = r.grid();
    let summary = r.summary();
    let mut doc = String::new();
    {
        let root = SVGBackend::with_string(&mut doc, (width, height)).into_drawing_area();
        root.fill(&WHITE)?;
        let text = |s: &str, at: (i32, i32), size: u32, pos: Pos, color: &RGBColor| {
            root.draw(&Text::new(
                crate::output::format::printable(s, false),
                at,
                ("sans-serif", size).into_font().color(color).pos(pos),
            ))
        };
        let lt = Pos::new(HPos::Left, VPos::Top);
        let cc = Pos::new(HPos::Center, VPos::Center);
        let rc = Pos::new(HPos::Right, VPos::Center);
        let margin = px(40.0) as i32;
        text(
            &format!(
                "{}: {metric}, {} {a} -> {b}",
                r.preset.as_deref().unwrap_or("readpath sweep"),
                r.compare.key
            ),
            (margin, px(24.0) as i32),
            px(34.0),
            lt,
            &BLACK,
        )?;
        text(
            &format!(
                "change per point, median of {} round(s) x {:.0} s, interleaved; {} {}",
                r.rounds,
                r.duration_s,
                r.ran.machine.cpu_model,
                format_args!(
                    "({} CPUs, Linux {})",
                    r.ran.machine.cpus, r.ran.machine.kernel
                )
            ),
            (margin, px(68.0) as i32),
            px(20.0),
            lt,
            &RGBColor(80, 80, 80),
        )?;
        // The footer's lines, wrapped to the width: the published
        // result, the legend, the summary.
        let foot = px(20.0);
        let chars = ((width as i32 - 2 * margin) / crate::output::plot::text_w(1, foot).max(1))
            .max(20) as usize;
        let mut lines: Vec<(String, RGBColor)> = Vec::new();
        if let Some(p) = &r.published {
            for l in crate::output::plot::wrap(
                &format!(
                    "published ({}): {metric} {}: {}",
                    p.source,
                    p.figure(),
                    p.result
                ),
                chars,
            ) {
                lines.push((l, BLACK));
            }
        }
        let published = r.published.is_some();
        let hints = r.points.iter().any(|p| p.verdict.kind == Kind::Hint);
        let legend = format!(
            "{}{}; grey, hatched: the rounds' ranges overlap (no direction)",
            if published {
                "green: the published sign, red: the opposite (ranges apart)"
            } else {
                "blue: lower, orange: higher (ranges apart)"
            },
            if hints {
                "; grey, ?: ranges apart, but too few rounds (noise gives that 5% of the time or more)"
            } else {
                ""
            }
        );
        for l in crate::output::plot::wrap(&legend, chars) {
            lines.push((l, RGBColor(60, 60, 60)));
        }
        for s in &summary {
            for l in crate::output::plot::wrap(s, chars) {
                lines.push((l, BLACK));
            }
        }
        // The grid's box: room on the left for row labels, on top for
        // column labels, under it for the footer.
        let line = px(30.0) as i32;
        let top = px(150.0) as i32;
        let left = margin + px(200.0) as i32;
        let right = width as i32 - margin;
        let bottom = height as i32 - line * lines.len() as i32 - px(40.0) as i32;
        let cw = (right - left) / cols.len().max(1) as i32;
        let ch = ((bottom - top) / rows.len().max(1) as i32).min(px(400.0) as i32);
        if r.across.len() > 1 {
            text(
                &r.across[1].key,
                ((left + right) / 2, top - px(52.0) as i32),
                px(22.0),
                cc,
                &RGBColor(80, 80, 80),
            )?;
            for (j, c) in cols.iter().enumerate() {
                let v = c.split_once('=').map_or(c.as_str(), |(_, v)| v);
                text(
                    v,
                    (left + cw * j as i32 + cw / 2, top - px(22.0) as i32),
                    px(24.0),
                    cc,
                    &BLACK,
                )?;
            }
        }
        text(
            &r.across[0].key,
            (margin, top - px(22.0) as i32),
            px(22.0),
            Pos::new(HPos::Left, VPos::Center),
            &RGBColor(80, 80, 80),
        )?;
        for (i, (row, cells_row)) in rows.iter().zip(&cells).enumerate() {
            let y0 = top + ch * i as i32;
            let v = row.split_once('=').map_or(row.as_str(), |(_, v)| v);
            text(
                v,
                (left - px(16.0) as i32, y0 + ch / 2),
                px(26.0),
                rc,
                &BLACK,
            )?;
            for (j, p) in cells_row.iter().enumerate() {
                let x0 = left + cw * j as i32;
                let (x1, y1) = (x0 + cw - px(6.0) as i32, y0 + ch - px(6.0) as i32);
                root.draw(&Rectangle::new(
                    [(x0, y0), (x1, y1)],
                    fill(p, published).filled(),
                ))?;
                // Overlapping ranges: hatched, so no colour is read as a
                // direction.
                if p.verdict.overlap || matches!(p.verdict.kind, Kind::Noise) {
                    let step = px(18.0) as i32;
                    let mut k = -(y1 - y0);
                    while k < x1 - x0 {
                        let (sx, sy) = (x0 + k.max(0), y1 - (-k).max(0));
                        let len = (x1 - sx).min(sy - y0);
                        root.draw(&PathElement::new(
                            [(sx, sy), (sx + len, sy - len)],
                            RGBColor(150, 150, 150).stroke_width(px(2.0)),
                        ))?;
                        k += step;
                    }
                }
                let cell = crate::output::sweep::cell_text(&p.verdict);
                let big = px(56.0).min((ch / 3).max(8) as u32);
                text(
                    &cell,
                    ((x0 + x1) / 2, (y0 + y1) / 2 - big as i32 / 3),
                    big,
                    cc,
                    &BLACK,
                )?;
                let m = r.metric();
                let med = |k: usize| {
                    p.variants
                        .get(k)
                        .and_then(|v| v.metrics.iter().find(|(n, _)| *n == r.metric))
                        .map(|(_, s)| {
                            m.map_or(format!("{:.1}", s.median), |m| {
                                m.cell(s.median).trim().to_string()
                            })
                        })
                        .unwrap_or_else(|| "-".into())
                };
                text(
                    &format!("{} -> {}", med(0), med(1)),
                    ((x0 + x1) / 2, (y0 + y1) / 2 + big as i32 * 2 / 3),
                    (big * 11 / 20).max(8),
                    cc,
                    &RGBColor(40, 40, 40),
                )?;
            }
        }
        let mut y = top + ch * rows.len() as i32 + px(24.0) as i32;
        for (l, color) in &lines {
            text(l, (margin, y), foot, lt, color)?;
            y += line;
        }
        root.present()?;
    }
    Ok(doc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::verdict::against;

    /// A cell whose ranges lie apart in too few rounds for a finding is
    /// grey, unhatched, marked `?`; the legend names `?` only where a
    /// cell has it.
    #[test]
    fn a_hint_is_grey_and_the_legend_says_so_only_then() {
        let mut r = crate::output::sweep::fixture();
        let svg4 = svg(&r, 1600, 1000).unwrap();
        assert!(!svg4.contains("grey, ?"), "4 v 4 rounds: no hint");
        let published = r.published.clone().unwrap();
        for p in &mut r.points {
            let s = |i: usize| p.variants[i].metrics[0].1;
            p.verdict = against(&s(0), &s(1), [3, 3], &published);
        }
        let hint = r
            .points
            .iter()
            .find(|p| p.verdict.kind == Kind::Hint)
            .expect("a cell apart in 3 v 3 rounds");
        assert_eq!(fill(hint, true), GREY);
        let svg3 = svg(&r, 1600, 1000).unwrap();
        assert!(
            svg3.contains("grey, ?"),
            "3 v 3 rounds: the legend names hints"
        );
    }
}
