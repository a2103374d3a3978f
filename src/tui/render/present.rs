//! Presentation mode (`m`, or `--present`): for a talk, the headline numbers
//! in digits readable from the back of the room (a 3x5 block font drawn
//! here, scaled to the largest its box allows, the unit beside it: no font
//! crate needed), a high-contrast palette, less chrome, one or
//! two charts, and a toast naming each change as it happens so the audience
//! can follow. Laid out to fit 80x24 and 120x40 exactly.
//!
//! ```text
//!  readpath ▶ running 00:01:23  decrypt: unbound -> verify: bound
//! ┌MiB/s─────────┐┌p99──────────┐┌run_delay/s──┐┌vs baseline──┐
//! │ ███ █ █      ││ ███ ███     ││  ██ ███     ││ ███ ███     │
//! │ ...          ││         ms  ││          ms ││   p99       │
//! └──────────────┘└─────────────┘└─────────────┘└─────────────┘
//! ┌latency (log)──────────────────────────────────────────────┐
//! └───────────────────────────────────────────────────────────┘
//!   ╭ mode: unbound -> bound ╮            m: leave presentation
//! ```

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Widget};

use super::look::Look;
use crate::scenario::demo::Headline;
use crate::tui::app::App;
use crate::tui::theme::Theme;

/// The palette of presentation mode: pure colours on black, bold.
pub fn high_contrast() -> Theme {
    Theme {
        text: Color::White,
        dim: Color::Gray,
        border: Color::White,
        title: Color::LightCyan,
        disabled: Color::DarkGray,
        good: Color::LightGreen,
        bad: Color::LightRed,
        warn: Color::LightYellow,
        marker: Color::LightMagenta,
        baseline: Color::LightBlue,
        series: [
            Color::LightGreen,
            Color::LightYellow,
            Color::LightRed,
            Color::LightCyan,
        ],
        busy: Color::LightGreen,
        iowait: Color::LightYellow,
    }
}

/// 3x5 glyphs of the characters numbers need.
fn glyph(c: char) -> [&'static str; 5] {
    match c {
        '0' => ["███", "█ █", "█ █", "█ █", "███"],
        '1' => [" █ ", "██ ", " █ ", " █ ", "███"],
        '2' => ["███", "  █", "███", "█  ", "███"],
        '3' => ["███", "  █", "███", "  █", "███"],
        '4' => ["█ █", "█ █", "███", "  █", "  █"],
        '5' => ["███", "█  ", "███", "  █", "███"],
        '6' => ["███", "█  ", "███", "█ █", "███"],
        '7' => ["███", "  █", "  █", "  █", "  █"],
        '8' => ["███", "█ █", "███", "█ █", "███"],
        '9' => ["███", "█ █", "███", "  █", "███"],
        '.' => ["   ", "   ", "   ", "   ", " █ "],
        '-' => ["   ", "   ", "███", "   ", "   "],
        '+' => ["   ", " █ ", "███", " █ ", "   "],
        '%' => ["█ █", "  █", " █ ", "█  ", "█ █"],
        'K' => ["█ █", "██ ", "█  ", "██ ", "█ █"],
        _ => ["   ", "   ", " ? ", "   ", "   "],
    }
}

/// Width in cells of `text` drawn big (a glyph and a space per character).
pub fn big_width(text: &str) -> u16 {
    (text.chars().count() as u16 * 4).saturating_sub(1)
}

/// Width in cells of `text` drawn big at `sx` cells per glyph column.
pub fn scaled_width(text: &str, sx: u16) -> u16 {
    big_width(text) * sx
}

/// The largest scale (columns, rows per glyph cell) at which `text`
/// fits `w` x `h` cells: rows at most twice columns apart (a terminal
/// cell is about twice as tall as wide, so (2, 1) looks square).
pub fn scale_for(text: &str, w: u16, h: u16) -> Option<(u16, u16)> {
    let base = big_width(text).max(1);
    let sx_max = w / base;
    let sy_max = h / 5;
    if sx_max == 0 || sy_max == 0 {
        return None;
    }
    // Keep the glyphs' shape: sx about 2 x sy.
    let sy = sy_max.min(sx_max.div_ceil(2)).max(1);
    let sx = sx_max.min(sy * 2).max(1);
    Some((sx, sy))
}

/// Draws `text` in block digits at (x, y), each glyph cell `sx` x `sy`.
fn draw_scaled(buf: &mut Buffer, x: u16, y: u16, text: &str, (sx, sy): (u16, u16), style: Style) {
    for (i, c) in text.chars().enumerate() {
        for (row, line) in glyph(c).iter().enumerate() {
            for (col, ch) in line.chars().enumerate() {
                if ch == ' ' {
                    continue;
                }
                let cx = x + (i as u16 * 4 + col as u16) * sx;
                let cy = y + row as u16 * sy;
                for dy in 0..sy {
                    buf.set_string(cx, cy + dy, "█".repeat(sx as usize), style);
                }
            }
        }
    }
}

/// A number in at most 4 characters, with its unit: `48.1`, `2.6` ms, `553` ms.
pub fn headline(v: f64, unit: &str) -> (String, String) {
    if !v.is_finite() {
        return ("-".into(), unit.into());
    }
    let (v, unit) = match unit {
        "us" if v >= 1_000_000.0 => (v / 1e6, "s".to_string()),
        "us" if v >= 1_000.0 => (v / 1e3, "ms".to_string()),
        u => (v, u.to_string()),
    };
    let text = if v >= 10_000.0 {
        format!("{:.0}K", v / 1e3)
    } else if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    };
    (text, unit)
}

fn big_box(
    title: &str,
    value: &str,
    unit: &str,
    color: Color,
    th: &Theme,
    area: Rect,
    buf: &mut Buffer,
) {
    // The unit goes in the title, so the digits get the whole width; where
    // the title and unit do not both fit the border, the unit alone.
    let room = area.width.saturating_sub(2) as usize;
    let title = if unit.is_empty() || unit == title {
        format!(" {title} ")
    } else if title.chars().count() + unit.chars().count() + 5 <= room {
        format!(" {title} ({unit}) ")
    } else {
        format!(" {unit} ")
    };
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(th.border())
        .title(Span::styled(title, th.title()));
    let inner = block.inner(area);
    block.render(area, buf);
    let style = Style::default().fg(color).add_modifier(Modifier::BOLD);
    // The unit beside the digits, at their foot, where it fits at the
    // scale the digits take.
    let unit_w = if unit.is_empty() || unit == "%" {
        0
    } else {
        unit.chars().count() as u16 + 1
    };
    let scale = scale_for(value, inner.width.saturating_sub(unit_w), inner.height)
        .map(|s| (s, unit_w))
        .or_else(|| scale_for(value, inner.width, inner.height).map(|s| (s, 0)));
    let Some(((sx, sy), uw)) = scale else {
        Line::from(Span::styled(format!("{value} {unit}"), style)).render(inner, buf);
        return;
    };
    let w = scaled_width(value, sx) + uw;
    let h = 5 * sy;
    let x = inner.x + (inner.width - w) / 2;
    let y = inner.y + (inner.height - h) / 2;
    draw_scaled(buf, x, y, value, (sx, sy), style);
    if uw > 0 {
        buf.set_string(
            x + scaled_width(value, sx) + 1,
            y + h - 1,
            unit,
            Style::default().fg(color),
        );
    }
}

/// The big numbers shown: the demo's (or the defaults), without those
/// that need a worker queue when none runs.
pub fn headlines(app: &App) -> Vec<Headline> {
    let plan = crate::engine::stages::Plan::of(app.running.effective());
    let queues = plan.first != crate::engine::stages::Placement::Inline
        || plan
            .second
            .is_some_and(|p| p != crate::engine::stages::Placement::Inline)
        || app
            .window
            .now()
            .is_some_and(|n| n.queue_p99_us > 0.0 || n.run_delay_ms_per_s > 0.0);
    let chosen: &[Headline] = if app.show.headline().is_empty() {
        &Headline::DEFAULT
    } else {
        app.show.headline()
    };
    let mut out: Vec<Headline> = chosen
        .iter()
        .copied()
        .filter(|h| queues || !h.needs_queues())
        .collect();
    if out.is_empty() {
        out.push(Headline::Throughput);
    }
    out
}

/// The change of `h` from the baseline to now, %, and what the baseline
/// panel's verdict over 2 s windows says of it (the change the panel and
/// the demo's verdict line state: [`crate::tui::state::Comparison::change`]).
/// With a baseline but under two windows a side it is `(NaN, TooShort)`:
/// no figure yet. None without a baseline.
fn change_of(app: &App, h: Headline) -> Option<(f64, Judged)> {
    app.baseline.get()?;
    let Some((c, kind)) = app.baseline.change(&app.window, h.metric()) else {
        return Some((f64::NAN, Judged::TooShort));
    };
    let judged = match kind {
        None => Judged::TooShort,
        Some(k) if k.is_significant() => Judged::Apart,
        Some(crate::output::verdict::Kind::Hint) => Judged::Hint,
        Some(_) => Judged::Noise,
    };
    Some((c, judged))
}

/// What the one verdict rule says of a change so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Judged {
    /// Under two windows a side: not judged yet (grey).
    TooShort,
    /// The sides' window ranges overlap (grey, `within noise`).
    Noise,
    /// The ranges apart in too few windows for a finding (grey, `a
    /// hint`).
    Hint,
    /// The ranges apart at a chance by noise under 5%: a result (green or
    /// red).
    Apart,
}

/// Green when better, red when worse, grey inside the noise.
fn change_style(h: Headline, pct: f64, quiet: bool, th: &Theme) -> Style {
    let better = if h.lower_is_better() {
        pct < 0.0
    } else {
        pct > 0.0
    };
    let color = if quiet {
        th.dim
    } else if better {
        th.good
    } else {
        th.bad
    };
    Style::default().fg(color).add_modifier(Modifier::BOLD)
}

/// Draws the presentation screen.
pub fn render(app: &App, look: &Look, area: Rect, buf: &mut Buffer) {
    let th = &look.theme;
    let charts = if area.height >= 34 { 2 } else { 1 };
    let big_h = if area.height >= 30 { 9 } else { 7 };
    // A demo's caption: a band of its own, up to three wrapped lines,
    // under the headline numbers; nothing covers it.
    let caption_lines = caption_lines(app, area.width);
    // This run's verdict under the caption, wrapped whole (never cut), the
    // note of how it was taken added where it fits.
    let verdict = app.demo_verdict().map(|(kind, line, how)| {
        let w = area.width.saturating_sub(4) as usize;
        let mut lines = crate::tui::text::wrap_words(&line, w, w);
        if let Some(last) = lines.last_mut()
            && last.chars().count() + 1 + how.chars().count() <= w
        {
            last.push(' ');
            last.push_str(&how);
        }
        (kind, lines)
    });
    let band_h = caption_lines.as_ref().map_or(0, |l| {
        l.len() as u16 + 2 + verdict.as_ref().map_or(0, |(_, v)| v.len() as u16)
    });
    let mut rows = vec![Constraint::Length(1), Constraint::Length(big_h)];
    if band_h > 0 {
        rows.push(Constraint::Length(band_h));
    }
    rows.extend(std::iter::repeat_n(Constraint::Fill(1), charts));
    // The markers' legend: what each number on the charts was.
    let legend = !app.window.markers().is_empty();
    if legend {
        rows.push(Constraint::Length(1));
    }
    rows.push(Constraint::Length(1));
    let parts = Layout::vertical(rows).split(area);
    if legend {
        render_marker_legend(app, th, parts[parts.len() - 2], buf);
    }
    let chart_at = if band_h > 0 { 3 } else { 2 };
    if let Some(lines) = &caption_lines {
        render_caption(app, lines, verdict.as_ref(), th, parts[2], buf);
    }
    render_header(app, th, parts[0], buf);
    render_headlines(app, th, parts[1], buf);
    if app.lanes.is_open() {
        // The timeline (`t`) in the charts' place, all their height.
        let first = parts[chart_at];
        let last = parts[chart_at + charts - 1];
        let r = Rect {
            height: last.y + last.height - first.y,
            ..first
        };
        super::timeline::render_timeline(app, look, r, buf);
    } else {
        // Charts: latency, and throughput when there is room.
        super::timecharts::latency_chart(app, look, parts[chart_at], buf);
        if charts == 2 {
            super::timecharts::sched_chart(app, look, parts[chart_at + 1], buf);
        }
    }
    render_footer(app, th, parts[parts.len() - 1], buf);
}

/// The markers on the charts, each `[n] what changed`, the newest that
/// fit whole (oldest of them first), so the numbers on a slide or a stage
/// screen can be read without the events panel.
fn render_marker_legend(app: &App, th: &Theme, area: Rect, buf: &mut Buffer) {
    let room = area.width.saturating_sub(2) as usize;
    let mut items: Vec<String> = Vec::new();
    let mut used = 0;
    for m in app.window.markers().iter().rev() {
        let item = format!("[{}] {}", m.n, m.label);
        let w = item.chars().count() + if items.is_empty() { 0 } else { 3 };
        if used + w > room {
            break;
        }
        used += w;
        items.push(item);
    }
    items.reverse();
    Line::from(Span::styled(
        format!(" {}", items.join(" · ")),
        Style::default().fg(th.marker),
    ))
    .render(area, buf);
}

/// A demo caption wrapped to `width`, at most three lines (a shipped
/// demo's always fit in three at 80 columns; a longer one's third line
/// keeps whole words and says the rest is in the summary).
fn caption_lines(app: &App, width: u16) -> Option<Vec<String>> {
    app.show.caption().map(|c| {
        let mut l = crate::tui::text::wrap_words(
            c,
            width.saturating_sub(4) as usize,
            width.saturating_sub(4) as usize,
        );
        if l.len() > 3 {
            let rest = l[2..].join(" ");
            l.truncate(2);
            l.push(crate::tui::text::fit_message(
                &rest,
                width.saturating_sub(4) as usize,
                "in the summary",
            ));
        }
        l
    })
}

/// The caption band, titled with the demo's progress.
fn render_caption(
    app: &App,
    lines: &[String],
    verdict: Option<&(crate::output::verdict::Kind, Vec<String>)>,
    th: &Theme,
    area: Rect,
    buf: &mut Buffer,
) {
    let title = app
        .show
        .progress(app.window.elapsed_s())
        .map_or(" demo ".to_string(), |p| format!(" {p} "));
    let mut text: Vec<Line> = lines
        .iter()
        .map(|l| {
            Line::from(Span::styled(
                l.clone(),
                Style::default().fg(th.title).add_modifier(Modifier::BOLD),
            ))
        })
        .collect();
    // Under the caption, this run's verdict, computed (never the caption's
    // claim): green where the published sign shows, red where the
    // opposite does, plain where the windows' ranges overlap.
    if let Some((kind, vlines)) = verdict {
        use crate::output::verdict::Kind;
        let color = match kind {
            Kind::Reproduced => th.good,
            Kind::NotReproduced => th.bad,
            _ => th.text,
        };
        for l in vlines {
            text.push(Line::from(Span::styled(
                l.clone(),
                Style::default().fg(color).add_modifier(Modifier::BOLD),
            )));
        }
    }
    Paragraph::new(text)
        .block(super::look::panel(&title, th))
        .render(area, buf);
}

/// Header: state, time, what runs where.
fn render_header(app: &App, th: &Theme, area: Rect, buf: &mut Buffer) {
    let t = app.window.elapsed_s() as u64;
    let state = match (app.running.replay(), app.view.paused()) {
        (_, true) => "⏸ paused".to_string(),
        (Some(r), false) => format!("▶ {r}"),
        (None, false) => "▶ running".to_string(),
    };
    Line::from(vec![
        Span::styled("readpath ", th.title()),
        Span::styled(
            format!("{state} "),
            Style::default().fg(th.good).add_modifier(Modifier::BOLD),
        ),
        Span::styled(format!("{:02}:{:02}  ", t / 60, t % 60), th.text()),
        // On a target: where, and loudly when the connection is lost.
        Span::styled(
            app.running
                .place()
                .map_or(String::new(), |p| format!("{}  ", p.line())),
            th.title(),
        ),
        Span::styled(
            if app.running.lost().is_some() {
                "✗ connection lost (R reconnects)  "
            } else {
                ""
            },
            Style::default().fg(th.bad).add_modifier(Modifier::BOLD),
        ),
        Span::styled(
            app.running.plan().to_string(),
            th.text().add_modifier(Modifier::BOLD),
        ),
    ])
    .render(area, buf);
}

/// The headline numbers over the "now" window, each with its window and change, then the change box.
fn render_headlines(app: &App, th: &Theme, area: Rect, buf: &mut Buffer) {
    // Headline numbers over the "now" window: the demo's metrics (or the
    // defaults), less those that do not apply (no queue: no queue p99 and
    // no run_delay), then the change of the first since the baseline.
    // While the live A/B runs, the numbers are the side on now (its
    // turn), never a window across both sides.
    let ab_side = app
        .baseline
        .ab()
        .and_then(|ab| ab.side_now(app.window.elapsed_s(), app.window.history().iter()));
    let now = ab_side.map(|(w, _)| w).or_else(|| app.window.now());
    let metrics = headlines(app);
    let secs = now.map_or(0.0, |n| n.secs);
    let mut cons = vec![Constraint::Fill(1); metrics.len()];
    cons.push(Constraint::Fill(1));
    let cols = Layout::horizontal(cons).split(area);
    for (i, h) in metrics.iter().enumerate() {
        let (v, u) = headline(now.map_or(f64::NAN, |n| h.of(&n)), h.unit());
        // During the A/B its own change (the change box says it for the
        // first number); the passive baseline's "now" spans both sides.
        let change = if app.baseline.ab().is_some() {
            None
        } else {
            change_of(app, *h)
        };
        big_box(
            h.title(),
            &v,
            &u,
            th.series[i % th.series.len()],
            th,
            cols[i],
            buf,
        );
        // Under each number: the window it is over (so it is not taken for
        // the chart legend's latest interval) and its change.
        let area = cols[i];
        let bottom = area.y + area.height.saturating_sub(1);
        if secs > 0.0 && area.width > 12 {
            let over = match ab_side {
                Some((_, side)) => format!(" {side}, {secs:.0} s "),
                None => format!(" last {secs:.0} s "),
            };
            buf.set_string(area.x + 1, bottom, over, th.dim());
        }
        if let Some((pct, judged)) = change.filter(|(pct, _)| pct.is_finite()) {
            let quiet = judged != Judged::Apart;
            let text = format!(" {pct:+.0}% ");
            let w = text.chars().count() as u16;
            if area.width > w + 12 {
                buf.set_string(
                    area.x + area.width - 1 - w,
                    bottom,
                    text,
                    change_style(*h, pct, quiet, th),
                );
            }
        }
    }
    let last = cols[cols.len() - 1];
    // While the live A/B runs, the change box is its verdict on the first
    // number, over the interleaved rounds (the baseline panel's table).
    // After it, its final verdict, until the next `b` or `A`.
    let ended = app.baseline.ab().is_none();
    let ab = app
        .baseline
        .ab()
        .or_else(|| app.baseline.ab_last().map(|(ab, _)| ab));
    if let (Some(ab), Some(h)) = (ab, metrics.first()) {
        let row = ab
            .rows()
            .into_iter()
            .find(|r| r.metric.name == h.metric().name);
        let rounds = ab.rounds();
        let name = h.title().trim_end_matches("/s");
        let room = last.width.saturating_sub(4) as usize;
        let rounds = crate::tui::ab::rounds_text(rounds);
        let what = if ended { "A/B result" } else { "A/B" };
        let titles = [
            format!("{name} {what}, {rounds}"),
            format!("{name} {what}"),
            format!("{what}, {rounds}"),
            what.to_string(),
        ];
        let title = crate::tui::text::first_fitting(&titles, room);
        match row.and_then(|r| r.verdict) {
            Some(v) => {
                let pct = v.change_pct.unwrap_or(0.0);
                let quiet = !v.kind.is_significant();
                let color = change_style(*h, pct, quiet, th).fg.unwrap_or(th.text);
                big_box(title, &format!("{pct:+.0}%"), "", color, th, last, buf);
                let f: Vec<String> = match v.kind {
                    crate::output::verdict::Kind::Hint => {
                        vec!["a hint, too few rounds".into(), "a hint".into()]
                    }
                    _ if quiet => vec!["within noise".into()],
                    _ => vec![
                        format!(
                            "chance by noise {}",
                            v.chance
                                .map_or("-".into(), crate::output::verdict::chance_text)
                        ),
                        "a finding".into(),
                    ],
                };
                border_note(&f, last, th, buf);
            }
            None => big_box(title, "-", "", th.dim, th, last, buf),
        }
        return;
    }
    match metrics
        .first()
        .and_then(|h| change_of(app, *h).map(|c| (h, c)))
    {
        Some((h, (pct, judged))) => {
            let quiet = judged != Judged::Apart;
            // The longest title that fits the box's border.
            let name = h.title().trim_end_matches("/s");
            let room = last.width.saturating_sub(4) as usize;
            // Titled by what changed since the baseline where one setting
            // did (what the demo or the presenter did), else generic.
            let did = app.baseline.get().and_then(|b| {
                let d = b.settings.diff(app.running.settings());
                (d.len() == 1).then(|| d[0].short_label())
            });
            let mut titles = Vec::new();
            if let Some(did) = &did {
                titles.push(format!("{name} after {did}"));
            }
            titles.extend([
                format!("{name} vs baseline"),
                format!("{name} vs base"),
                format!("{name} change"),
                format!("{} change", h.unit()),
                "change".to_string(),
            ]);
            let title = crate::tui::text::first_fitting(&titles, room);
            let text = if pct.is_finite() {
                format!("{pct:+.0}%")
            } else {
                "-".to_string()
            };
            let color = change_style(*h, pct, quiet, th).fg.unwrap_or(th.text);
            big_box(title, &text, "", color, th, last, buf);
            // On the bottom border: whether the change is noise (or not
            // judged yet), then what changed where the title could not
            // say it.
            let noise: &[&str] = match judged {
                Judged::Apart => &[],
                Judged::Noise => &["within noise"],
                Judged::Hint => &["a hint, too few windows", "a hint"],
                Judged::TooShort => &["too short to judge", "measuring"],
            };
            let mut foot: Vec<String> = Vec::new();
            let did = did.as_ref().filter(|_| !title.contains(" after "));
            if let Some(did) = did {
                foot.extend(noise.iter().map(|n| format!("{did} · {n}")));
                if noise.is_empty() {
                    foot.push(did.clone());
                }
            }
            foot.extend(noise.iter().map(|n| n.to_string()));
            border_note(&foot, last, th, buf);
        }
        // No baseline yet: in a demo a step marks it, live `b` does.
        None => {
            let hint = if app.show.demo_step().is_some() {
                "a step marks it"
            } else {
                "press b"
            };
            big_box("vs baseline", "-", "", th.dim, th, last, buf);
            border_note(&[hint.to_string()], last, th, buf);
        }
    }
}

/// Writes the first of `notes` (most telling first) that fits whole on
/// `area`'s bottom border, dim; none where none fits.
fn border_note(notes: &[String], area: Rect, th: &Theme, buf: &mut Buffer) {
    let room = area.width.saturating_sub(2) as usize;
    if let Some(n) = notes.iter().find(|n| n.chars().count() + 2 <= room) {
        buf.set_string(
            area.x + 1,
            area.y + area.height.saturating_sub(1),
            format!(" {n} "),
            th.dim(),
        );
    }
}

/// The footer: the hint to leave, and the latest change as a toast for 5 s after it happened.
fn render_footer(app: &App, th: &Theme, footer: Rect, buf: &mut Buffer) {
    let hint = " m: leave presentation ";
    buf.set_string(
        footer.x + footer.width.saturating_sub(hint.len() as u16),
        footer.y,
        hint,
        th.dim(),
    );
    // The toast names the latest change (captions have their band; the
    // demo's step is the band's title), never cut mid-word.
    let toast = app
        .window
        .markers()
        .iter()
        .rev()
        .find(|m| app.window.elapsed_s() - m.t_s <= 5.0 && !m.label.starts_with("caption: "))
        .map(|m| m.label.clone())
        .map(|l| {
            crate::tui::text::fit_message(
                &l,
                footer.width.saturating_sub(hint.len() as u16 + 4) as usize,
                "in the summary",
            )
        })
        .filter(|l| !l.is_empty());
    if let Some(label) = toast {
        let text = format!(" ▶ {label} ");
        buf.set_stringn(
            footer.x,
            footer.y,
            text,
            footer.width.saturating_sub(hint.len() as u16) as usize,
            Style::default()
                .fg(Color::Black)
                .bg(th.marker)
                .add_modifier(Modifier::BOLD),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headlines_fit_four_characters() {
        assert_eq!(headline(48.12, "MiB/s"), ("48.1".into(), "MiB/s".into()));
        assert_eq!(headline(2648.0, "us"), ("2.65".into(), "ms".into()));
        assert_eq!(headline(553_800.0, "us"), ("554".into(), "ms".into()));
        assert_eq!(headline(13_325.0, "IOPS"), ("13K".into(), "IOPS".into()));
        assert_eq!(big_width("-96%"), 15);
    }

    /// The digits take the largest scale their box allows, keeping their
    /// shape (columns at most twice rows), and none where they cannot fit.
    #[test]
    fn big_digits_scale_to_the_box() {
        // 4 characters: 15 columns at scale 1.
        assert_eq!(scale_for("2.99", 36, 7), Some((2, 1)));
        assert_eq!(scale_for("2.99", 36, 12), Some((2, 1)));
        assert_eq!(scale_for("2.99", 64, 12), Some((4, 2)));
        assert_eq!(scale_for("2.99", 100, 12), Some((4, 2)));
        assert_eq!(scale_for("2.99", 14, 12), None);
        assert_eq!(scale_for("2.99", 40, 4), None);
        assert_eq!(scaled_width("2.99", 2), 30);
    }
}
