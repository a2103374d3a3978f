//! A finished sweep in the explorer (`readpath replay SWEEP.json`): the
//! grid of changes, each cell coloured by its verdict (green: the published
//! sign, red: the opposite, plain: within noise or a hint, ranges apart in
//! too few rounds for a finding), the computed summary of
//! where the sign holds and flips, and the selected cell's two medians,
//! ranges and verdict in words. Arrows move, `q` or Esc leaves.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Widget, Wrap};

use crate::output::sweep::{SweepPoint, SweepReport, cell_text};
use crate::output::verdict::Kind;
use crate::tui::theme::Theme;

/// Where the cursor is: row and column of the grid.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cursor {
    /// Row (first axis).
    pub row: usize,
    /// Column (second axis).
    pub col: usize,
}

impl Cursor {
    /// Moves by (`dr`, `dc`) within a grid of `rows` x `cols`.
    pub fn moved(self, dr: isize, dc: isize, rows: usize, cols: usize) -> Cursor {
        let clamp = |v: usize, d: isize, n: usize| {
            (v as isize + d).clamp(0, n.saturating_sub(1) as isize) as usize
        };
        Cursor {
            row: clamp(self.row, dr, rows),
            col: clamp(self.col, dc, cols),
        }
    }
}

fn style_of(p: &SweepPoint, th: &Theme) -> Style {
    let s = Style::default().add_modifier(Modifier::BOLD);
    match p.verdict.kind {
        Kind::Reproduced if !p.verdict.overlap => s.fg(th.good),
        Kind::NotReproduced => s.fg(th.bad),
        Kind::Apart => s.fg(th.warn),
        _ => Style::default().fg(th.dim),
    }
}

/// Draws the sweep with the cursor at `at`.
pub fn render(r: &SweepReport, at: Cursor, th: &Theme, area: Rect, buf: &mut Buffer) {
    let (rows, cols, cells) = r.grid();
    let metric = r.metric().map_or(r.metric.as_str(), |m| m.label);
    let (a, b) = (
        r.compare.values.first().map_or("", String::as_str),
        r.compare.values.get(1).map_or("", String::as_str),
    );
    // The summary wrapped to the panel, a whole line per fact.
    let inner_w = area.width.saturating_sub(2) as usize;
    let hint = if r.points.iter().any(|p| p.verdict.kind == Kind::Hint) {
        " · ? apart, too few rounds"
    } else {
        ""
    };
    let legend = if r.published.is_some() {
        format!("✓ published sign · ✗ opposite, ranges apart{hint} · ~ ranges overlap")
    } else {
        format!("~ the rounds' ranges overlap: no direction{hint}")
    };
    let mut summary: Vec<String> = crate::tui::text::wrap_words(&legend, inner_w, inner_w);
    for l in r.summary() {
        summary.extend(crate::tui::text::wrap_words(&l, inner_w, inner_w));
    }
    let grid_h = rows.len() as u16 + 3;
    let parts = Layout::vertical([
        Constraint::Length(2),
        Constraint::Length(grid_h),
        Constraint::Length(summary.len() as u16 + 2),
        Constraint::Fill(1),
        Constraint::Length(1),
    ])
    .split(area);
    // What it is.
    // Two header lines of whole fields: a field that does not fit is
    // left out, never cut.
    let fit = |fields: Vec<String>, width: usize| -> String {
        let mut out = String::new();
        for f in fields {
            let add = if out.is_empty() {
                f.clone()
            } else {
                format!(" · {f}")
            };
            if out.chars().count() + add.chars().count() <= width {
                out.push_str(&add);
            }
        }
        out
    };
    let w = area.width as usize;
    let first = fit(
        vec![
            format!("{metric}: {} {a} -> {b}", r.compare.key),
            r.published
                .as_ref()
                .map_or(String::new(), |p| format!("published {}", p.figure())),
        ]
        .into_iter()
        .filter(|f| !f.is_empty())
        .collect(),
        w.saturating_sub(15),
    );
    let second = fit(
        [
            r.preset.as_ref().map(|p| format!("preset {p}")),
            Some(format!("{} points", r.points.len())),
            Some(format!(
                "{} round(s) x {:.0} s, interleaved",
                r.rounds, r.duration_s
            )),
            Some(format!(
                "{} ({} CPUs)",
                r.ran.machine.cpu_model, r.ran.machine.cpus
            )),
        ]
        .into_iter()
        .flatten()
        .collect(),
        w,
    );
    Paragraph::new(vec![
        Line::from(vec![
            Span::styled("readpath sweep ", th.title()),
            Span::styled(first, th.text()),
        ]),
        Line::from(Span::styled(second, th.dim())),
    ])
    .render(parts[0], buf);
    // The grid: row labels, then a column per value of the second axis.
    let texts: Vec<Vec<String>> = cells
        .iter()
        .map(|row| row.iter().map(|p| cell_text(&p.verdict)).collect())
        .collect();
    let w0 = rows.iter().map(|s| s.chars().count()).max().unwrap_or(0) + 2;
    let wc = cols
        .iter()
        .enumerate()
        .map(|(c, t)| {
            texts
                .iter()
                .filter_map(|r| r.get(c))
                .map(|t| t.chars().count())
                .chain(std::iter::once(t.chars().count()))
                .max()
                .unwrap_or(4)
                + 3
        })
        .collect::<Vec<_>>();
    let mut lines = Vec::new();
    let mut head = vec![Span::raw(" ".repeat(w0))];
    for (c, w) in cols.iter().zip(&wc) {
        head.push(Span::styled(format!("{c:>w$}"), th.dim()));
    }
    lines.push(Line::from(head));
    for (i, (label, row)) in rows.iter().zip(&cells).enumerate() {
        let mut spans = vec![Span::styled(format!("{label:<w0$}"), th.dim())];
        for (j, p) in row.iter().enumerate() {
            let mut st = style_of(p, th);
            if (i, j) == (at.row, at.col) {
                st = st.add_modifier(Modifier::REVERSED);
            }
            let w = wc[j];
            spans.push(Span::styled(format!("{:>w$}", texts[i][j]), st));
        }
        lines.push(Line::from(spans));
    }
    Paragraph::new(lines)
        .block(crate::tui::render::look::panel(
            &format!("change of {metric}, {a} -> {b}"),
            th,
        ))
        .render(parts[1], buf);
    // Where the sign holds and flips.
    let sl: Vec<Line> = summary
        .iter()
        .map(|s| Line::from(Span::styled(s.clone(), th.text())))
        .collect();
    Paragraph::new(sl)
        .block(crate::tui::render::look::panel("summary", th))
        .render(parts[2], buf);
    // The selected cell in words.
    if let Some(p) = cells.get(at.row).and_then(|r| r.get(at.col)) {
        let m = r.metric();
        let spread = |k: usize| {
            p.variants
                .get(k)
                .and_then(|v| v.metrics.iter().find(|(n, _)| *n == r.metric))
                .map(|(_, s)| *s)
        };
        let cell = |k: usize, v: &str| match (spread(k), m) {
            (Some(s), Some(m)) if s.median.is_finite() => format!(
                "{v}: {} (rounds {}-{})",
                m.cell(s.median).trim(),
                m.cell(s.min).trim(),
                m.cell(s.max).trim()
            ),
            _ => format!("{v}: not measured"),
        };
        let at_text: Vec<String> = p.at.iter().map(|(k, v)| format!("{k} = {v}")).collect();
        let mut dl = vec![
            Line::from(Span::styled(at_text.join(", "), th.title())),
            Line::from(Span::styled(cell(0, a), th.text())),
            Line::from(Span::styled(cell(1, b), th.text())),
            Line::from(Span::styled(p.verdict.text.clone(), style_of(p, th))),
        ];
        if let Some(pb) = &p.published {
            dl.push(Line::from(Span::styled(
                format!("published ({}): {}", pb.source, pb.result),
                th.dim(),
            )));
        }
        for n in &p.notices {
            dl.push(Line::from(Span::styled(format!("notice: {n}"), th.dim())));
        }
        Paragraph::new(dl)
            .wrap(Wrap { trim: true })
            .block(crate::tui::render::look::panel("the selected point", th))
            .render(parts[3], buf);
    }
    Line::from(vec![
        Span::styled(" ←↑↓→", th.title()),
        Span::styled(" move a point ", th.dim()),
        Span::styled(" q", th.title()),
        Span::styled(" or ", th.dim()),
        Span::styled("Esc", th.title()),
        Span::styled(" quit", th.dim()),
    ])
    .render(parts[4], buf);
}

/// Shows `r` until `q`, Esc, Ctrl-C or a stop signal, the terminal taken
/// and given back in the explorer's one place; a stop signal's number is
/// returned (the caller exits with it).
pub fn show(r: &SweepReport, theme: &Theme) -> std::io::Result<Option<i32>> {
    use ratatui::crossterm::event::{Event, KeyCode, KeyEventKind, KeyModifiers};
    let (rows, cols, _) = r.grid();
    crate::sys::install_terminal_handlers();
    super::install_panic_hook();
    let mut term = match super::enter_terminal(false) {
        Ok(t) => t,
        Err(e) => {
            super::leave_terminal();
            return Err(e);
        }
    };
    let mut at = Cursor::default();
    let mut events = Vec::new();
    let result = (|| -> std::io::Result<Option<i32>> {
        loop {
            match crate::sys::stop_signal() {
                0 => {}
                sig => return Ok(Some(sig)),
            }
            term.draw(|f| render(r, at, theme, f.area(), f.buffer_mut()))?;
            events.clear();
            match super::input::read_events(200, &mut events) {
                super::input::Input::Gone => return Ok(None),
                super::input::Input::Idle => continue,
                super::input::Input::Keys => {}
            }
            for e in &events {
                let Event::Key(k) = e else { continue };
                if k.kind == KeyEventKind::Release {
                    continue;
                }
                let ctrl_c =
                    k.code == KeyCode::Char('c') && k.modifiers.contains(KeyModifiers::CONTROL);
                if ctrl_c || matches!(k.code, KeyCode::Char('q') | KeyCode::Esc) {
                    return Ok(None);
                }
                let (dr, dc) = match k.code {
                    KeyCode::Up | KeyCode::Char('k') => (-1, 0),
                    KeyCode::Down | KeyCode::Char('j') => (1, 0),
                    KeyCode::Left | KeyCode::Char('h') => (0, -1),
                    KeyCode::Right | KeyCode::Char('l') => (0, 1),
                    _ => (0, 0),
                };
                at = at.moved(dr, dc, rows.len(), cols.len());
            }
        }
    })();
    super::leave_terminal();
    super::release(term, false);
    result
}
