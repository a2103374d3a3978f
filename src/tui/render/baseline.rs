//! The baseline-vs-now panel: each metric for the baseline and the window since
//! the last change (or mark), and the change in percent, green when better.
//! "now" is compared only once it holds a few seconds ("collecting..."
//! until then). Whether a change is a result is decided by the one verdict
//! rule (`output::verdict`) over 2 s windows after a 1 s settle: the two
//! sides' ranges of window values apart at a chance by noise under 5%, or
//! not (`~` where they overlap, `?` where they lie apart in too few
//! windows, greyed); the windows it used are counted on screen (`2 s
//! windows: base 14, now 7; ~ overlap`). While the live A/B runs (`A`),
//! the panel shows its interleaved rounds instead (see `tui::ab`).

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Widget, Wrap};

use super::look::*;
use crate::metrics::{METRICS, Metric, Spread, WindowStats};
use crate::output::verdict::Kind;
use crate::output::verdict::WINDOW_S;
use crate::tui::ab::{self, AbRun, SIDES, TURN_S};
use crate::tui::app::App;
use crate::tui::state::{Baseline, MIN_WINDOWS};
use crate::tui::theme::Theme;

pub(crate) fn render_baseline(app: &App, th: &Theme, area: Rect, buf: &mut Buffer) {
    if let Some(ab) = app.baseline.ab() {
        render_ab(ab, app.window.elapsed_s(), None, th, area, buf);
        return;
    }
    if let Some((ab, ended)) = app.baseline.ab_last() {
        render_ab(ab, *ended, Some(*ended), th, area, buf);
        return;
    }
    let Some(base) = app.baseline.get() else {
        let block = panel("baseline vs now", th);
        let inner = block.inner(area);
        block.render(area, buf);
        no_baseline(th, inner, buf);
        return;
    };
    // One setting changed since the baseline: the title says which where
    // it fits (the panel's last line may not show at 120x40).
    let changed = base.settings.diff(app.running.settings());
    let mut titles = Vec::new();
    if let [one] = changed.as_slice() {
        titles.push(format!("baseline vs now · {}", one.short_label()));
        titles.push(format!("vs base: {}", one.short_label()));
        let key = one.key.rsplit('.').next().unwrap_or(&one.key);
        titles.push(format!("vs base: {key}={}", one.to));
    }
    titles.push("baseline vs now".to_string());
    let title = crate::tui::text::first_fitting(&titles, area.width.saturating_sub(4) as usize);
    let titled = title != "baseline vs now";
    let mut block = panel(title, th);
    let inner = block.inner(area);
    // Columns narrow where the panel is (120x40): never wrapped under a row.
    let narrow = inner.width < 38;
    let (mut lines, kinds) = metric_rows(app, base, narrow, th);
    let (bw, nw) = (base.windows.len(), app.window.now_windows().len());
    let windows = if nw < MIN_WINDOWS {
        format!("now: {nw} of {MIN_WINDOWS} windows of {WINDOW_S:.0} s")
    } else if narrow {
        format!("{bw} v {nw} windows; {}", windows_note(&kinds, bw, nw))
    } else {
        format!(
            "{WINDOW_S:.0} s windows: base {bw}, now {nw}; {}",
            windows_note(&kinds, bw, nw)
        )
    };
    // The windows the rows are from are always said: under the rows, or
    // where the rows fill the panel (80x24), in its bottom border.
    if lines.len() < inner.height as usize {
        lines.push(Line::from(Span::styled(windows, th.dim())));
    } else {
        let short = if nw < MIN_WINDOWS {
            format!("now {nw} of {MIN_WINDOWS} windows")
        } else {
            format!("{bw} v {nw} windows; {}", windows_note(&kinds, bw, nw))
        };
        let forms = [format!(" {windows} "), format!(" {short} ")];
        let fit = crate::tui::text::first_fitting(&forms, area.width.saturating_sub(4) as usize);
        block = block.title_bottom(Line::from(Span::styled(fit.to_string(), th.dim())));
    }
    block.render(area, buf);
    // The spread the rule used, for the first metric (as the A/B says it).
    if nw >= MIN_WINDOWS
        && let Some(m) = METRICS.iter().find(|m| m.explorer)
    {
        let range = |w: &[WindowStats]| range_text(m, &Spread::of(w.iter().map(m.window)));
        let (b, n) = (range(&base.windows), range(app.window.now_windows()));
        lines.push(Line::from(Span::styled(
            if narrow {
                format!("{} {b} v {n}", m.short)
            } else {
                format!("{} ranges: base {b}, now {n}", m.short)
            },
            th.dim(),
        )));
    }
    if let Some(d) = &base.drift {
        lines.push(Line::from(Span::styled(
            format!("baseline still moving: {d}; b again once it settles"),
            Style::default().fg(th.warn),
        )));
    }
    if !titled {
        lines.push(settings_line(base, app, th));
    }
    // The preset's published result against this run: computed.
    if let Some((kind, line, how)) = app.demo_verdict() {
        use crate::output::verdict::Kind;
        let style = match kind {
            Kind::Reproduced => Style::default().fg(th.good),
            Kind::NotReproduced => Style::default().fg(th.bad),
            _ => th.text(),
        };
        lines.push(Line::from(vec![
            Span::styled(line, style),
            Span::styled(format!(" {how}"), th.dim()),
        ]));
    }
    Paragraph::new(lines)
        .wrap(Wrap { trim: false })
        .render(inner, buf);
}

/// The panel before a baseline is marked: how to mark one.
fn no_baseline(th: &Theme, inner: Rect, buf: &mut Buffer) {
    Paragraph::new(vec![
        Line::from(Span::styled("no baseline yet", th.dim())),
        Line::from(vec![
            Span::styled("press ", th.dim()),
            Span::styled("b", th.title()),
            Span::styled(" to mark the current window,", th.dim()),
        ]),
        Line::from(Span::styled("then change a setting and compare", th.dim())),
    ])
    .wrap(Wrap { trim: false })
    .render(inner, buf);
}

/// What the verdicts over the panel's windows say, after their counts:
/// `~ overlap` where a change's ranges overlap, `? apart, 10% by noise`
/// where they lie apart in too few windows for a finding, else `apart`
/// with the chance by noise of `bw` v `nw` windows.
fn windows_note(kinds: &[Kind], bw: usize, nw: usize) -> String {
    let chance = crate::output::verdict::chance_text(crate::output::verdict::chance_apart(
        bw as u32, nw as u32,
    ));
    let noise = kinds
        .iter()
        .any(|k| !k.is_significant() && *k != Kind::Hint);
    let hint = kinds.contains(&Kind::Hint);
    match (noise, hint) {
        (false, false) => format!("apart, chance by noise {chance}"),
        (true, false) => "~ overlap".into(),
        (false, true) => format!("? apart, {chance} by noise"),
        (true, true) => format!("~ overlap, ? apart, {chance} by noise"),
    }
}

/// The header and one row per explorer metric: the median of the
/// baseline's windows, the median of "now"'s and the verdict's change
/// between those two (so each row is arithmetic), "…" for "now" until it
/// holds [`MIN_WINDOWS`]; and the verdict's kind of each change judged.
fn metric_rows(
    app: &App,
    base: &Baseline,
    narrow: bool,
    th: &Theme,
) -> (Vec<Line<'static>>, Vec<Kind>) {
    let mut lines = vec![table_header(narrow, th)];
    let mut kinds = Vec::new();
    // The table's metrics the explorer shows, each with its own getter,
    // format, direction and spread.
    for m in METRICS.iter().filter(|m| m.explorer) {
        let b = Spread::of(base.windows.iter().map(m.window)).median;
        let v = app.baseline.verdict_on(&app.window, m, None);
        let change = v
            .as_ref()
            .and_then(|v| Some((v.verdict.change_pct?, Some(v.verdict.kind))));
        kinds.extend(change.and_then(|(_, k)| k));
        let shown = |x: f64| if x.is_finite() { m.show(x) } else { "-".into() };
        let now = v.as_ref().map_or("…".into(), |v| shown(v.after));
        let pending = if v.is_some() { "-" } else { "…" };
        lines.push(table_row(m, shown(b), now, change, pending, narrow, th));
    }
    (lines, kinds)
}

/// The live A/B, or (`ended`: when) the last one's result, which stays
/// until the next `b` or `A`: per metric each side's median over its
/// turns, the change, and the verdict over the rounds (compare's rule);
/// then where the clock is (or that it ended) and the throughput's
/// verdict in words.
fn render_ab(ab: &AbRun, t_s: f64, ended: Option<f64>, th: &Theme, area: Rect, buf: &mut Buffer) {
    let rounds = ab.rounds();
    // The clock in the title (it stays when the rows fill the panel),
    // whole: the longest form that fits, each the one before less its
    // last part.
    let (round, side, at) = (rounds + 1, SIDES[ab.on], ab.secs_into_turn(t_s).min(TURN_S));
    let titles = match ended {
        None => [
            format!("live A/B · round {round} · on {side} {at:.0}/{TURN_S:.0} s"),
            format!("A/B · round {round} · {side} {at:.0}/{TURN_S:.0} s"),
            format!("A/B · round {round}"),
            "A/B".to_string(),
        ],
        Some(t) => [
            format!(
                "A/B result · {} · ended at {}",
                ab::rounds_text(rounds),
                fmt_t(t)
            ),
            format!("A/B result · {}", ab::rounds_text(rounds)),
            "A/B result".to_string(),
            "A/B".to_string(),
        ],
    };
    let block = panel_fit(&titles, area.width, th);
    let inner = block.inner(area);
    block.render(area, buf);
    let narrow = inner.width < 38;
    let mut lines = vec![table_header(narrow, th)];
    let rows = ab.rows();
    for r in &rows {
        let m = r.metric;
        let cell = |x: f64| {
            if x.is_finite() {
                m.show(x)
            } else {
                "…".into()
            }
        };
        let change = r
            .verdict
            .as_ref()
            .and_then(|v| v.change_pct.map(|c| (c, Some(v.kind))));
        let pending = if r.verdict.is_some() { "-" } else { "…" };
        lines.push(table_row(
            m,
            cell(r.spreads[0].median),
            cell(r.spreads[1].median),
            change,
            pending,
            narrow,
            th,
        ));
    }
    if let Some(r) = rows.first()
        && let Some(v) = &r.verdict
    {
        let style = match v.kind {
            Kind::Apart => th.text(),
            _ => th.dim(),
        };
        let m = r.metric;
        lines.push(Line::from(Span::styled(
            format!(
                "{}: {}; base {}, now {}",
                m.short,
                v.text,
                range_text(m, &r.spreads[0]),
                range_text(m, &r.spreads[1]),
            ),
            style,
        )));
        lines.push(Line::from(Span::styled(
            match ended {
                None => format!("{:.1} s of each turn dropped · A stops", ab::SETTLE_S),
                Some(_) => "final: b marks a new baseline, A runs it again".to_string(),
            },
            th.dim(),
        )));
    }
    Paragraph::new(lines)
        .wrap(Wrap { trim: false })
        .render(inner, buf);
}

/// A spread's range as the panel states it (`77.4-81.8`): the spread
/// a verdict judged.
fn range_text(m: &Metric, sp: &Spread) -> String {
    format!("{}-{}", m.show(sp.min).trim(), m.show(sp.max).trim())
}

/// The comparison table's header (the passive panel's and the A/B's).
fn table_header(narrow: bool, th: &Theme) -> Line<'static> {
    let (nw, cw) = widths(narrow);
    Line::from(Span::styled(
        format!(
            "{:<nw$}{:>cw$}{:>cw$}{:>cw$}",
            "",
            if narrow { "base" } else { "baseline" },
            "now",
            "change"
        ),
        th.dim(),
    ))
}

/// Name and value columns, narrow where the panel is (120x40).
fn widths(narrow: bool) -> (usize, usize) {
    if narrow { (8, 7) } else { (11, 9) }
}

/// One metric's row: its name, the two values, and the change with its
/// verdict's kind (None: no verdict yet, grey and unmarked); a change the
/// verdict calls noise is grey with `~`, a hint (ranges apart in too few
/// windows or rounds for a finding) grey with `?`, a result green when better and
/// red when worse (grey under 2%). `pending` stands for a change not
/// measured.
fn table_row(
    m: &Metric,
    base: String,
    now: String,
    change: Option<(f64, Option<Kind>)>,
    pending: &str,
    narrow: bool,
    th: &Theme,
) -> Line<'static> {
    let (nw, cw) = widths(narrow);
    let (chg, color) = match change {
        None => (pending.to_string(), th.dim),
        Some((c, Some(k))) if k.is_significant() => (
            format!("{c:+.0}%"),
            if c.abs() < 2.0 {
                th.dim
            } else if m.better_by(c) {
                th.good
            } else {
                th.bad
            },
        ),
        Some((c, Some(Kind::Hint))) => (format!("?{c:+.0}%"), th.dim),
        Some((c, Some(_))) => (format!("~{c:+.0}%"), th.dim),
        Some((c, None)) => (format!("{c:+.0}%"), th.dim),
    };
    Line::from(vec![
        Span::styled(
            format!("{:<nw$}", if narrow { m.narrow } else { m.short }),
            th.text(),
        ),
        Span::styled(format!("{base:>cw$}"), Style::default().fg(th.baseline)),
        Span::styled(format!("{now:>cw$}"), th.text()),
        Span::styled(format!("{chg:>cw$}"), Style::default().fg(color)),
    ])
}

/// What differs from the baseline: one key is a comparison of it; more are named, since the change is then theirs together.
fn settings_line(base: &Baseline, app: &App, th: &Theme) -> Line<'static> {
    let changed = base.settings.diff(app.running.settings());
    match changed.len() {
        0 => Line::from(Span::styled(
            format!("baseline: {} (same settings)", base.label),
            th.dim(),
        )),
        1 => Line::from(Span::styled(
            format!("vs baseline: {}", changed[0].label()),
            th.dim(),
        )),
        n => Line::from(Span::styled(
            format!(
                "{n} settings differ from the baseline: {}",
                changed
                    .iter()
                    .map(|c| c.key.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Style::default().fg(th.warn),
        )),
    }
}
