//! The latency distribution panel: the window's log buckets, with the
//! baseline's share as a tick on each row.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::Span;
use ratatui::widgets::{Paragraph, Widget};

use super::look::*;
use crate::metrics::format::fmt_us;
use crate::metrics::{BUCKETS_PER_OCTAVE, LatencyBuckets};
use crate::tui::app::App;
use crate::tui::theme::Theme;

/// Bucket counts merged `group` at a time (to fit the rows), with the
/// group's lower edge in us.
pub(crate) fn grouped(counts: &[u64], group: usize) -> Vec<(f64, u64)> {
    counts
        .chunks(group)
        .enumerate()
        .map(|(i, c)| (LatencyBuckets::lower_edge_us(i * group), c.iter().sum()))
        .collect()
}

pub(crate) fn render_distribution(app: &App, th: &Theme, area: Rect, buf: &mut Buffer) {
    let now = app.window.now_buckets().to_vec();
    let base = app.baseline.get().map(|b| b.buckets.clone());
    let titles: &[&str] = if base.is_some() {
        &["distribution: now ━ baseline │", "now ━ base │", "latency"]
    } else {
        &[
            "latency distribution (now)",
            "distribution (now)",
            "latency",
        ]
    };
    let block = panel_fit(titles, area.width, th);
    let inner = block.inner(area);
    block.render(area, buf);
    if inner.height < 2 || now.is_empty() && base.is_none() {
        Paragraph::new(Span::styled("waiting for samples", th.dim())).render(inner, buf);
        return;
    }
    let n = now.len().max(base.as_ref().map_or(0, |b| b.len()));
    let nz = |v: &[u64]| {
        let first = v.iter().position(|&c| c > 0);
        let last = v.iter().rposition(|&c| c > 0);
        first.zip(last)
    };
    let mut range = nz(&now).unwrap_or((0, 0));
    if let Some((a, b)) = base.as_deref().and_then(nz) {
        range = (range.0.min(a), range.1.max(b));
    }
    // Groups of 1, 2 or 4 buckets (quarter, half, whole octaves) to fit.
    let rows = inner.height as usize;
    let group = [1, 2, BUCKETS_PER_OCTAVE]
        .into_iter()
        .find(|g| (range.1 / g - range.0 / g + 1) <= rows)
        .unwrap_or(BUCKETS_PER_OCTAVE);
    let pad = |v: &[u64]| {
        let mut v = v.to_vec();
        v.resize(n, 0);
        grouped(&v, group)
    };
    let now_g = pad(&now);
    let base_g = base.as_deref().map(pad);
    let total = |g: &[(f64, u64)]| g.iter().map(|x| x.1).sum::<u64>().max(1) as f64;
    let (tn, tb) = (total(&now_g), base_g.as_deref().map_or(1.0, total));
    let (first, last) = (range.0 / group, (range.1 / group).min(now_g.len() - 1));
    let label_w = 7usize;
    let pct_w = 6usize;
    let bar_w = (inner.width as usize)
        .saturating_sub(label_w + pct_w + 1)
        .max(1);
    let max_share = (first..=last)
        .map(|i| {
            let b = base_g.as_ref().map_or(0.0, |g| g[i].1 as f64 / tb);
            (now_g[i].1 as f64 / tn).max(b)
        })
        .fold(0.0, f64::max)
        .max(1e-9);
    for (row, i) in (first..=last).take(rows).enumerate() {
        let y = inner.y + row as u16;
        let share = now_g[i].1 as f64 / tn;
        let len = ((share / max_share) * bar_w as f64).round() as usize;
        buf.set_string(inner.x, y, format!("{:>6} ", fmt_us(now_g[i].0)), th.dim());
        buf.set_string(
            inner.x + label_w as u16,
            y,
            "━".repeat(len),
            Style::default().fg(th.series[0]),
        );
        if let Some(g) = &base_g {
            let b = g[i].1 as f64 / tb;
            if b > 0.0 {
                let x = ((b / max_share) * bar_w as f64).round() as usize;
                buf.set_string(
                    inner.x + (label_w + x.min(bar_w - 1)) as u16,
                    y,
                    "│",
                    Style::default()
                        .fg(th.baseline)
                        .add_modifier(Modifier::BOLD),
                );
            }
        }
        if share > 0.0 {
            buf.set_string(
                inner.x + (label_w + bar_w + 1) as u16,
                y,
                format!("{:>5.1}%", share * 100.0),
                th.text(),
            );
        }
    }
}
