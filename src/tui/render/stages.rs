//! The stages panel: mean time per read in device, queue, decrypt and verify,
//! and per-CPU busy and iowait bars.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::widgets::Widget;

use crate::metrics::IntervalRecord;
use crate::output::format::fmt_us;
use crate::tui::app::App;
use crate::tui::look::*;
use crate::tui::theme::Theme;

pub(crate) fn render_stages(app: &App, th: &Theme, area: Rect, buf: &mut Buffer) {
    let block = panel("stages (now) and CPUs (last 1s)", th);
    let inner = block.inner(area);
    block.render(area, buf);
    let recs: Vec<&IntervalRecord> = app.now_records().filter(|r| !r.paused).collect();
    let mean = |f: fn(&IntervalRecord) -> f64| {
        let n: u64 = recs.iter().map(|r| r.reads).sum();
        if n == 0 {
            0.0
        } else {
            recs.iter().map(|r| f(r) * r.reads as f64).sum::<f64>() / n as f64
        }
    };
    let stages = [
        ("device", mean(|r| r.stages_us.device.mean), th.series[3]),
        ("queue", mean(|r| r.stages_us.queue.mean), th.series[1]),
        ("decrypt", mean(|r| r.stages_us.decrypt.mean), th.series[0]),
        ("verify", mean(|r| r.stages_us.verify.mean), th.series[2]),
    ];
    let total: f64 = stages.iter().map(|s| s.1).sum::<f64>().max(1e-9);
    let bar_w = (inner.width as usize).saturating_sub(22).max(1);
    let mut y = inner.y;
    let bottom = inner.y + inner.height;
    if y < bottom {
        buf.set_string(inner.x, y, "mean per read", th.dim());
        y += 1;
    }
    for (name, us, color) in stages {
        if y >= bottom {
            return;
        }
        let len = (us / total * bar_w as f64).round() as usize;
        buf.set_string(
            inner.x,
            y,
            format!("{name:<8}{:>7} ", fmt_us(us)),
            th.text(),
        );
        buf.set_string(inner.x + 16, y, "█".repeat(len), Style::default().fg(color));
        buf.set_string(
            inner.x + 16 + bar_w as u16,
            y,
            format!("{:>4.0}%", us / total * 100.0),
            th.dim(),
        );
        y += 1;
    }
    // Per-CPU busy and iowait, averaged over the last second.
    let lastsec: Vec<&IntervalRecord> = app
        .history
        .iter()
        .rev()
        .take_while(|r| app.elapsed_s - r.t_s < 1.0)
        .collect();
    let ncpu = lastsec.first().map_or(0, |r| r.cpus.len());
    if y < bottom && ncpu > 0 {
        buf.set_string(inner.x, y, "CPU  busy ", th.dim());
        buf.set_string(inner.x + 10, y, "█", Style::default().fg(th.busy));
        buf.set_string(inner.x + 12, y, "iowait ", th.dim());
        buf.set_string(inner.x + 19, y, "▒", Style::default().fg(th.iowait));
        y += 1;
    }
    let bar_w = (inner.width as usize).saturating_sub(18).max(1);
    for cpu in 0..ncpu {
        if y >= bottom {
            return;
        }
        let avg = |f: fn(&crate::sys::CpuUsage) -> f64| {
            lastsec
                .iter()
                .filter_map(|r| r.cpus.get(cpu).map(f))
                .sum::<f64>()
                / lastsec.len().max(1) as f64
        };
        let (busy, iow) = (avg(|c| c.busy_pct), avg(|c| c.iowait_pct));
        // Clamped: a replayed recording is range-checked, but a bar never
        // trusts its input to size an allocation.
        let (busy, iow) = (busy.clamp(0.0, 100.0), iow.clamp(0.0, 100.0));
        let b = ((busy / 100.0 * bar_w as f64).round() as usize).min(bar_w);
        let w = ((iow / 100.0 * bar_w as f64).round() as usize).min(bar_w - b.min(bar_w));
        buf.set_string(inner.x, y, format!("cpu{cpu:<2}"), th.text());
        buf.set_string(inner.x + 6, y, "█".repeat(b), Style::default().fg(th.busy));
        buf.set_string(
            inner.x + 6 + b as u16,
            y,
            "▒".repeat(w),
            Style::default().fg(th.iowait),
        );
        buf.set_string(
            inner.x + 6 + bar_w as u16,
            y,
            format!("{busy:>4.0}%{iow:>4.0}%"),
            th.dim(),
        );
        y += 1;
    }
}
