//! The timeline (`t`): where each work item ran over the last few hundred
//! milliseconds, in the charts' place. A lane per CPU shows its work
//! items in their stage's colour (decrypt, verify, both in one item) and
//! the hogs' time there; a lane per reader shows it running and asleep.
//! Each cell is a slice of the window: its glyph says how much of it the
//! items filled (█ half or more, ▄ a sixth or more, ▁ less), and a cell
//! with no item but a hog is ▒. The chosen item (← →) has its wait drawn
//! from its queueing to its start on the lane it ran on, and a line
//! under the lanes says where it was queued, by whom it ran and how long
//! it waited. The markers of the charts show where they fall.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span as Text};
use ratatui::widgets::{Paragraph, Widget};

use super::look::*;
use crate::metrics::format::fmt_us;
use crate::metrics::{Span, SpanKind, fill_columns as fill};
use crate::tui::app::App;
use crate::tui::theme::Theme;

/// Columns of a lane's label (`CPU 12 `, `reader-0 `).
const LABEL_W: u16 = 9;

/// A kind's colour on the lanes.
fn color(kind: SpanKind, th: &Theme) -> Color {
    match kind {
        SpanKind::Decrypt => th.series[3],
        SpanKind::Verify => th.series[0],
        SpanKind::DecryptVerify => th.series[1],
        SpanKind::Sleep => th.dim,
        SpanKind::Hog => th.bad,
    }
}

/// One CPU lane's cells: per cell the ns each item kind filled, and the
/// hogs'.
struct Cells {
    items: Vec<[u64; 3]>,
    hog: Vec<u64>,
}

/// Draws the timeline into `r` (its panel and all).
pub(super) fn render_timeline(app: &App, look: &Look, r: Rect, buf: &mut Buffer) {
    let th = &look.theme;
    let lanes = &app.lanes;
    let (from, to) = lanes.span();
    let frozen = if lanes.frozen() {
        " · frozen (space)"
    } else {
        ""
    };
    let title = format!(
        "timeline · last {} ms{frozen} · where each work item ran",
        lanes.window_ms()
    );
    let short = format!("timeline · {} ms{frozen}", lanes.window_ms());
    let titles = [title.as_str(), short.as_str(), "timeline"];
    let block = panel_fit(&titles, r.width, th);
    let inner = block.inner(r);
    block.render(r, buf);
    if inner.width <= LABEL_W + 4 || inner.height < 4 {
        return;
    }
    if !lanes.has_spans() {
        let msg = match lanes.note() {
            Some(why) => why.to_string(),
            // Traced intervals came, none with a span.
            None if lanes.empty_intervals() >= 4 => format!(
                "no span in {} intervals: no work item ran and no reader slept (decrypt and verity off, or readers in a synchronous pread)",
                lanes.empty_intervals()
            ),
            None => "tracing… the first spans come with the next interval".to_string(),
        };
        Paragraph::new(Line::styled(msg, th.dim()))
            .wrap(ratatui::widgets::Wrap { trim: true })
            .render(inner, buf);
        return;
    }
    let width = (inner.width - LABEL_W) as usize;
    let per = ((to - from) / width as u64).max(1);
    let cpus = app.window.history().back().map_or(0, |r| r.cpus.len()).max(
        lanes
            .visible()
            .map(|s| s.cpu as usize + 1)
            .max()
            .unwrap_or(0),
    );
    let mut cells: Vec<Cells> = (0..cpus)
        .map(|_| Cells {
            items: vec![[0; 3]; width],
            hog: vec![0; width],
        })
        .collect();
    let readers = lanes.readers();
    let mut asleep: Vec<Vec<u64>> = vec![vec![0; width]; readers.len()];
    for s in lanes.visible() {
        match s.kind {
            SpanKind::Sleep => {
                if let Some(i) = readers.iter().position(|(t, _)| *t == s.tid) {
                    fill(from, per, width, s.start_ns, s.end_ns, |c, ns| {
                        asleep[i][c] += ns
                    });
                }
            }
            k => {
                let Some(lane) = cells.get_mut(s.cpu as usize) else {
                    continue;
                };
                fill(from, per, width, s.start_ns, s.end_ns, |c, ns| match k {
                    SpanKind::Hog => lane.hog[c] += ns,
                    k => lane.items[c][k as usize] += ns,
                });
            }
        }
    }
    // Rows: the legend, the lanes that fit, the axis, the chosen item.
    let chosen = lanes.chosen();
    let foot = 1 + u16::from(chosen.is_some() || lanes.dropped() > 0);
    let room = inner.height.saturating_sub(1 + foot) as usize;
    let mut rows: Vec<Line> = vec![legend(th, inner.width as usize)];
    let shown_cpus = cpus.min(room);
    // A CPU's lane is taller where there is room (up to 3 rows: a bar
    // chart of how full each slice was); a reader's is one row.
    let lane_h = ((room.saturating_sub(readers.len())) / shown_cpus.max(1)).clamp(1, MAX_LANE_ROWS);
    for (cpu, lane) in cells.iter().enumerate().take(shown_cpus) {
        for row in (0..lane_h).rev() {
            let label = if row == 0 {
                format!("CPU {cpu}")
            } else {
                String::new()
            };
            let mut spans = vec![Text::styled(
                format!("{label:<w$}", w = LABEL_W as usize),
                th.dim(),
            )];
            for c in 0..width {
                spans.push(cpu_cell(lane, c, per, (row, lane_h), th));
            }
            rows.push(Line::from(spans));
        }
    }
    let cpu_rows = shown_cpus * lane_h;
    let reader_rows = readers.len().min(room - cpu_rows);
    for (i, (_, name)) in readers.iter().enumerate().take(reader_rows) {
        let label: String = name.chars().take(LABEL_W as usize - 1).collect();
        let mut spans = vec![Text::styled(
            format!("{label:<w$}", w = LABEL_W as usize),
            th.dim(),
        )];
        for &ns in &asleep[i] {
            spans.push(if ns * 2 >= per {
                Text::styled("┄", th.dim())
            } else {
                Text::styled("█", Style::default().fg(th.text))
            });
        }
        rows.push(Line::from(spans));
    }
    let hidden = (cpus - shown_cpus) + (readers.len() - reader_rows);
    while rows.len() < 1 + room {
        rows.push(Line::default());
    }
    if hidden > 0 {
        rows[room] = Line::styled(
            format!("+{hidden} lanes below (a taller terminal shows them)"),
            th.dim(),
        );
    }
    rows.push(axis(from, to, width, th));
    if let Some(s) = chosen {
        rows.push(chosen_line(app, &s, th, inner.width as usize));
    } else if lanes.dropped() > 0 {
        rows.push(Line::styled(
            format!(
                "{} spans not kept (the run's logs were full)",
                lanes.dropped()
            ),
            Style::default().fg(th.warn),
        ));
    }
    Paragraph::new(rows).render(inner, buf);
    // The chosen item's wait, on the lane it ran on, and its start.
    if let Some(s) = chosen
        && (s.cpu as usize) < shown_cpus
    {
        // On the lane's bottom row.
        let y = inner.y + 1 + (s.cpu + 1) * lane_h as u16 - 1;
        let x0 = inner.x + LABEL_W;
        let col = |t: u64| (t.saturating_sub(from) / per).min(width as u64 - 1) as u16;
        let style = Style::default().fg(th.marker).add_modifier(Modifier::BOLD);
        for c in col(s.queued_ns)..col(s.start_ns) {
            buf[(x0 + c, y)].set_symbol("┄").set_style(style);
        }
        buf[(x0 + col(s.start_ns), y)]
            .set_symbol("◆")
            .set_style(style);
    }
    // The charts' markers that fall in the window, over the legend row.
    for m in app.window.markers() {
        let t = (m.t_s * 1e9) as u64;
        if (from..to).contains(&t) {
            let x = inner.x + LABEL_W + ((t - from) / per) as u16;
            buf[(x, inner.y)]
                .set_symbol(&m.n.to_string()[..1])
                .set_style(Style::default().fg(th.marker));
        }
    }
}

/// The most rows a CPU's lane takes.
const MAX_LANE_ROWS: usize = 3;

/// A CPU lane's cell in row `row` (from the bottom) of a lane `rows`
/// tall: its busiest item kind, its bar as high as the share of the slice
/// items filled (one row: █ half or more, ▄ a sixth or more, ▁ less; a
/// taller lane in eighths of a row, at least ▁ at the bottom); else, in
/// every row, a hog's shade; else empty.
fn cpu_cell(
    lane: &Cells,
    c: usize,
    per: u64,
    (row, rows): (usize, usize),
    th: &Theme,
) -> Text<'static> {
    let it = lane.items[c];
    let busy: u64 = it.iter().sum();
    if busy > 0 {
        let kind = SpanKind::ALL[(0..3).max_by_key(|&k| it[k]).unwrap_or(0)];
        let style = Style::default().fg(color(kind, th));
        if rows == 1 {
            let glyph = if busy * 2 >= per {
                "█"
            } else if busy * 6 >= per {
                "▄"
            } else {
                "▁"
            };
            return Text::styled(glyph, style);
        }
        // The bar's height in eighths of a row, at least one.
        let h = ((busy.min(per) * 8 * rows as u64).div_ceil(per)).max(1);
        let below = row as u64 * 8;
        const EIGHTHS: [&str; 9] = [" ", "▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"];
        let glyph = EIGHTHS[h.saturating_sub(below).min(8) as usize];
        if glyph != " " || lane.hog[c] == 0 {
            return Text::styled(glyph, style);
        }
    }
    if lane.hog[c] > 0 {
        return Text::styled("▒", Style::default().fg(color(SpanKind::Hog, th)));
    }
    Text::raw(" ")
}

/// The legend: each kind in its colour, as much as fits.
fn legend(th: &Theme, width: usize) -> Line<'static> {
    let mut spans = vec![Text::raw(" ".repeat(LABEL_W as usize))];
    let mut used = LABEL_W as usize;
    for (glyph, name, c) in [
        ("█", "decrypt", color(SpanKind::Decrypt, th)),
        ("█", "verify", color(SpanKind::Verify, th)),
        ("█", "decrypt+verify", color(SpanKind::DecryptVerify, th)),
        ("▒", "hog", color(SpanKind::Hog, th)),
        ("┄", "reader asleep", th.dim),
        ("◆", "chosen item, ┄ its wait", th.marker),
    ] {
        let w = name.chars().count() + 3;
        if used + w > width {
            break;
        }
        used += w;
        spans.push(Text::styled(glyph, Style::default().fg(c)));
        spans.push(Text::styled(format!(" {name} "), th.dim()));
    }
    Line::from(spans)
}

/// The time axis: the window's start, middle and end, as run time.
fn axis(from: u64, to: u64, width: usize, th: &Theme) -> Line<'static> {
    let s = |ns: u64| format!("{:.3}s", ns as f64 / 1e9);
    let (a, m, b) = (s(from), s((from + to) / 2), s(to));
    let w = width;
    let mut text = String::with_capacity(w);
    text.push_str(&a);
    let mid_at = (w / 2).saturating_sub(m.len() / 2);
    if mid_at > text.len() + 1 && mid_at + m.len() + b.len() + 1 < w {
        text.push_str(&" ".repeat(mid_at - text.len()));
        text.push_str(&m);
    }
    if text.len() + b.len() < w {
        text.push_str(&" ".repeat(w - text.len() - b.len()));
        text.push_str(&b);
    }
    Line::from(vec![
        Text::raw(" ".repeat(LABEL_W as usize)),
        Text::styled(text, th.dim()),
    ])
}

/// The chosen item, in words: the most of them that fits `width` (who
/// ran it goes first, then how long it ran).
fn chosen_line(app: &App, s: &Span, th: &Theme, width: usize) -> Line<'static> {
    let who = app
        .lanes
        .thread(s.tid)
        .map_or(format!(" by tid {}", s.tid), |n| {
            format!(" by {n} (tid {})", s.tid)
        });
    let moved = if s.queued_cpu == s.cpu {
        "queued there".to_string()
    } else {
        format!("queued on CPU {}", s.queued_cpu)
    };
    let (waited, ran) = (
        fmt_us(s.wait_ns() as f64 / 1e3),
        fmt_us(s.len_ns() as f64 / 1e3),
    );
    let head = format!("{} on CPU {}", s.kind.name(), s.cpu);
    let forms = [
        format!("{head}{who}, {moved}, waited {waited}, ran {ran}"),
        format!("{head}, {moved}, waited {waited}, ran {ran}"),
        format!("{head}, {moved}, waited {waited}"),
        format!("{head}, waited {waited}"),
    ];
    let text = forms
        .iter()
        .find(|f| f.chars().count() + 2 <= width)
        .unwrap_or(&forms[3])
        .clone();
    Line::from(vec![
        Text::styled("◆ ", Style::default().fg(th.marker)),
        Text::styled(text, Style::default().fg(th.text)),
    ])
}
