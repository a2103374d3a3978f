//! The `?` screen: every key, and what each kernel knob means in plain
//! words (from the kernel facts readpath follows), so a demo audience and a
//! new user learn the same vocabulary. The key list is
//! [`super::keys::BINDINGS`], as README.md's key table is.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Widget, Wrap};

use super::keys::BINDINGS;
use super::theme::Theme;

/// What the knobs mean, in plain words.
pub const KNOBS: &[(&str, &str)] = &[
    (
        "bound",
        "a per-CPU workqueue: the work runs on the CPU whose interrupt completed the read. \
         Cache-warm, but one busy CPU serialises everything (fsverity since v6.3: \
         run_delay 553,800 us -> 18,962 us, -96%, on Android app start).",
    ),
    (
        "unbound",
        "WQ_UNBOUND: any idle CPU may take the work (within an affinity scope since v6.5). \
         Spreads slow work (fscrypt since 2018: 25-35% faster without AES instructions, \
         within ~2% with them).",
    ),
    (
        "inline",
        "no workqueue: process in the completion context (dm-crypt no_read_workqueue). \
         No queueing delay, no parallelism.",
    ),
    (
        "highpri",
        "WQ_HIGHPRI: workers at nice -20, ahead of ordinary threads such as the hogs.",
    ),
    (
        "iowait",
        "a sleep counted as iowait (io_schedule). The 2023 io_uring change made the CQ wait \
         do this: QD1 reads were 20-40% slower without it on some machines (cpufreq/cpuidle \
         boost). plain = IORING_ENTER_NO_IOWAIT (6.15+); poll = never sleep.",
    ),
    (
        "run_delay",
        "time a worker was runnable but not running (/proc/.../schedstat): the fsverity \
         patch's 'workqueue scheduler latency'. queue = enqueue until a worker starts it.",
    ),
];

/// Draws the help over `area`.
pub fn render(area: Rect, buf: &mut Buffer, th: &Theme) {
    let r = super::look::popup(
        area,
        area.width.saturating_sub(4).min(110),
        area.height.saturating_sub(2),
        buf,
    );
    let row = |k: &str, what: &'static str| {
        Line::from(vec![
            Span::styled(format!("{k:>9}  "), th.title()),
            Span::styled(what, th.text()),
        ])
    };
    let lines: Vec<Line> = BINDINGS
        .iter()
        .map(|b| row(&b.label(), b.help))
        .chain([Line::from("")])
        .chain(KNOBS.iter().map(|&(k, what)| row(k, what)))
        .collect();
    Paragraph::new(lines)
        .wrap(Wrap { trim: false })
        .block(super::look::panel(
            "help: keys and knobs (any key closes)",
            th,
        ))
        .render(r, buf);
}
