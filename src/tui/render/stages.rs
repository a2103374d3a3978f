//! The stages panel: mean time per read (per bio on the page-cache path)
//! in device, queue, decrypt and verify, the irq threads' run_delay and CPU
//! (`completion = irq`), each workqueue's workers (running, blocked on the
//! fs-verity tree, and the tree pages they read), the page cache's hit rate
//! and bios per second, and per-CPU busy and iowait bars.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::widgets::Widget;

use super::look::*;
use crate::metrics::IntervalRecord;
use crate::metrics::format::fmt_us;
use crate::tui::app::App;
use crate::tui::theme::Theme;

pub(crate) fn render_stages(app: &App, th: &Theme, area: Rect, buf: &mut Buffer) {
    let block = panel_fit(
        &[
            "stages (now) and CPUs (last 1s)",
            "stages, CPUs (1s)",
            "stages",
        ],
        area.width,
        th,
    );
    let inner = block.inner(area);
    block.render(area, buf);
    let recs: Vec<&IntervalRecord> = app.window.now_records().filter(|r| !r.paused).collect();
    let mut rows = Rows {
        buf,
        inner,
        y: inner.y,
    };
    stage_bars(&recs, th, &mut rows);
    // Each queue's pool: workers running and blocked now and the most
    // blocked at once; then the tree pages the verify workers read and the
    // time they spent blocked on them, per second.
    if !recs.is_empty() {
        pool_lines(&recs, th, &mut rows);
        kernel_queue_lines(&recs, th, &mut rows);
        tree_line(&recs, th, &mut rows);
    }
    irq_line(&recs, th, &mut rows);
    cpu_bars(app, th, &mut rows);
}

/// The panel's rows, written top down: each line goes on the next row
/// while one is left, cut to the width by whole fields.
struct Rows<'b> {
    buf: &'b mut Buffer,
    inner: Rect,
    /// The next row.
    y: u16,
}

impl Rows<'_> {
    /// No row is left.
    fn full(&self) -> bool {
        self.y >= self.inner.y + self.inner.height
    }

    /// Writes `line` on the next row (whole fields only, separated by two
    /// spaces or ` · `, never a cut one), if one is left.
    fn line(&mut self, line: &str, style: Style) {
        if self.full() {
            return;
        }
        let line = crate::tui::text::fit_fields(line, self.inner.width as usize);
        self.buf.set_string(self.inner.x, self.y, line, style);
        self.y += 1;
    }

    /// `long`, or where it does not fit the width, `short()`.
    fn line_or(&mut self, long: String, short: impl FnOnce() -> String, style: Style) {
        if long.chars().count() > self.inner.width as usize {
            self.line(&short(), style);
        } else {
            self.line(&long, style);
        }
    }

    /// Writes `text` at column `dx` of the next row (the pieces of a bar).
    fn put(&mut self, dx: usize, text: impl AsRef<str>, style: Style) {
        self.buf
            .set_string(self.inner.x + dx as u16, self.y, text, style);
    }

    /// The pieces of the next row are written: go to the row after.
    fn next(&mut self) {
        self.y += 1;
    }
}

/// The heading (cache or kernel line) and one bar per stage's mean time.
fn stage_bars(recs: &[&IntervalRecord], th: &Theme, rows: &mut Rows<'_>) {
    // Each stage's mean over its own samples: per read on a direct path,
    // per bio (work item) on the page-cache path.
    let mean = |f: fn(&IntervalRecord) -> &crate::metrics::Percentiles| {
        let n: u64 = recs.iter().map(|r| f(r).count).sum();
        if n == 0 {
            0.0
        } else {
            recs.iter()
                .map(|r| f(r).mean * f(r).count as f64)
                .sum::<f64>()
                / n as f64
        }
    };
    let seen = |f: fn(&IntervalRecord) -> &crate::metrics::Percentiles| {
        recs.iter().any(|r| f(r).count > 0)
    };
    let stages = [
        (
            "device",
            mean(|r| &r.stages_us.device),
            th.series[3],
            seen(|r| &r.stages_us.device),
        ),
        (
            "queue",
            mean(|r| &r.stages_us.queue),
            th.series[1],
            seen(|r| &r.stages_us.queue),
        ),
        (
            "decrypt",
            mean(|r| &r.stages_us.decrypt),
            th.series[0],
            seen(|r| &r.stages_us.decrypt),
        ),
        (
            "verify",
            mean(|r| &r.stages_us.verify),
            th.series[2],
            seen(|r| &r.stages_us.verify),
        ),
    ];
    let cache = cache_line(recs);
    let total: f64 = stages.iter().map(|s| s.1).sum::<f64>().max(1e-9);
    let bar_w = (rows.inner.width as usize).saturating_sub(22).max(1);
    let kernel = recs.iter().any(|r| r.kernel.is_some());
    {
        let line = match &cache {
            _ if kernel => {
                let cached = recs
                    .last()
                    .and_then(|r| r.kernel.as_ref())
                    .map_or(0, |k| k.cached_bytes);
                format!(
                    "kernel, per item · cached {:.0}M",
                    cached as f64 / (1 << 20) as f64
                )
            }
            Some(c) => format!("per bio · {c}"),
            None => "mean per read".to_string(),
        };
        rows.line(&line, th.dim());
    }
    for (name, us, color, measured) in stages {
        if rows.full() {
            break;
        }
        // The kernel target shows what its tracepoints measured: a stage
        // they never saw (verify on a kernel without fs-verity) is left
        // out, not drawn as a zero.
        if kernel && !measured {
            continue;
        }
        let len = (us / total * bar_w as f64).round() as usize;
        rows.put(0, format!("{name:<8}{:>7} ", fmt_us(us)), th.text());
        rows.put(16, "█".repeat(len), Style::default().fg(color));
        rows.put(
            16 + bar_w,
            format!("{:>4.0}%", us / total * 100.0),
            th.dim(),
        );
        rows.next();
    }
}

/// One line per workqueue pool of the newest record (running, blocked, most blocked).
fn pool_lines(recs: &[&IntervalRecord], th: &Theme, rows: &mut Rows<'_>) {
    let Some(last) = recs.last() else {
        return;
    };
    for p in &last.pools {
        if rows.full() {
            break;
        }
        let peak = recs
            .iter()
            .flat_map(|r| &r.pools)
            .filter(|q| q.queue == p.queue && q.kind == p.kind)
            .map(|q| q.blocked_peak)
            .max()
            .unwrap_or(0);
        let kind = if p.kind == "bound" { "bnd" } else { "unb" };
        let style = if peak > 0 { th.text() } else { th.dim() };
        rows.line_or(
            format!(
                "{:<8} {kind}  run {}/{}  blk {}  max {peak}",
                p.queue, p.running, p.workers, p.blocked
            ),
            // Narrow: running of the pool's workers and blocked, in the
            // same words (the help's stages legend); the kind and the
            // peak left out.
            || format!("{} {}/{} blk {}", p.queue, p.running, p.workers, p.blocked),
            style,
        );
    }
}

/// The kernel's own queues (their tracepoints): items per second, the worst queue p99 of the last second, and the share run on another CPU.
fn kernel_queue_lines(recs: &[&IntervalRecord], th: &Theme, rows: &mut Rows<'_>) {
    let secs = f64::max(recs.iter().map(|r| r.interval_s).sum(), 1e-9);
    for name in crate::metrics::POST_READ_QUEUES {
        let qs: Vec<_> = recs
            .iter()
            .filter_map(|r| r.kernel.as_ref())
            .flat_map(|k| &k.queues)
            .filter(|q| q.queue == *name)
            .collect();
        if qs.is_empty() || rows.full() {
            continue;
        }
        let items: u64 = qs.iter().map(|q| q.items).sum();
        let p99 = qs.iter().map(|q| q.queue_us.p99).fold(0.0, f64::max);
        let moved =
            qs.iter().map(|q| q.moved_pct * q.items as f64).sum::<f64>() / items.max(1) as f64;
        let short = name.trim_end_matches("_read_queue").trim_end_matches("_wq");
        rows.line_or(
            format!(
                "{name} {:.0}/s q p99 {} moved {moved:.0}%",
                items as f64 / secs,
                fmt_us(p99)
            ),
            || {
                format!(
                    "{short}  {:.0}/s  q p99 {}",
                    items as f64 / secs,
                    fmt_us(p99)
                )
            },
            th.text(),
        );
    }
}

/// The fs-verity tree pages read and the time blocked on them, per second.
fn tree_line(recs: &[&IntervalRecord], th: &Theme, rows: &mut Rows<'_>) {
    let secs = f64::max(recs.iter().map(|r| r.interval_s).sum(), 1e-9);
    let (pages, blocked_ms) = recs.iter().fold((0u64, 0.0), |a, r| {
        (
            a.0 + r.page_cache.tree_pages_read,
            a.1 + r.page_cache.tree_blocked_ms,
        )
    });
    if pages > 0 {
        rows.line_or(
            format!(
                "tree {:.0} pg/s  blocked {:.1} ms/s",
                pages as f64 / secs,
                blocked_ms / secs
            ),
            || {
                format!(
                    "tree {:.0}/s  blk {:.0}ms/s",
                    pages as f64 / secs,
                    blocked_ms / secs
                )
            },
            th.text(),
        );
    }
}

/// The irq threads (`completion = irq`), apart from the workers: run_delay and CPU.
fn irq_line(recs: &[&IntervalRecord], th: &Theme, rows: &mut Rows<'_>) {
    let (irq_threads, irq_delay, irq_cpu, secs) =
        recs.iter()
            .filter(|r| r.irq.threads > 0)
            .fold((0u32, 0.0, 0.0, 0.0), |a, r| {
                (
                    a.0.max(r.irq.threads),
                    a.1 + r.irq.run_delay_us,
                    a.2 + r.irq.cpu_us,
                    a.3 + r.interval_s,
                )
            });
    if irq_threads > 0 {
        let secs = f64::max(secs, 1e-9);
        let line = format!(
            "irq x{irq_threads}  run_delay {:.1} ms/s  cpu {:.0}%",
            irq_delay / secs / 1e3,
            irq_cpu / secs / 1e4
        );
        rows.line(&line, th.text());
    }
}

/// Per-CPU busy and iowait bars, averaged over the last second, under their legend.
fn cpu_bars(app: &App, th: &Theme, rows: &mut Rows<'_>) {
    let lastsec: Vec<&IntervalRecord> = app
        .window
        .history()
        .iter()
        .rev()
        .take_while(|r| app.window.elapsed_s() - r.t_s < 1.0)
        .collect();
    let ncpu = lastsec.first().map_or(0, |r| r.cpus.len());
    if !rows.full() && ncpu > 0 {
        rows.put(0, "CPU  busy ", th.dim());
        rows.put(10, "█", Style::default().fg(th.busy));
        rows.put(12, "iowait ", th.dim());
        rows.put(19, "▒", Style::default().fg(th.iowait));
        rows.next();
    }
    let bar_w = (rows.inner.width as usize).saturating_sub(18).max(1);
    for cpu in 0..ncpu {
        if rows.full() {
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
        rows.put(0, format!("cpu{cpu:<2}"), th.text());
        rows.put(6, "█".repeat(b), Style::default().fg(th.busy));
        rows.put(6 + b, "▒".repeat(w), Style::default().fg(th.iowait));
        rows.put(6 + bar_w, format!("{busy:>4.0}%{iow:>4.0}%"), th.dim());
        rows.next();
    }
}

/// "hit N% · X bio/s" of the page cache over `recs` (None off the
/// page-cache path): the stages panel's first line, and the event log's
/// title where the stages panel has no room.
pub(crate) fn cache_line(recs: &[&IntervalRecord]) -> Option<String> {
    let (hits, misses, bios, secs) = recs.iter().fold((0u64, 0u64, 0u64, 0.0), |a, r| {
        (
            a.0 + r.page_cache.hits,
            a.1 + r.page_cache.misses,
            a.2 + r.page_cache.bios,
            a.3 + r.interval_s,
        )
    });
    if hits + misses == 0 {
        return None;
    }
    let rate = crate::metrics::format::fmt_count(bios as f64 / f64::max(secs, 1e-9));
    Some(format!(
        "hit {:.0}% · {rate} bio/s",
        hits as f64 * 100.0 / (hits + misses) as f64
    ))
}
