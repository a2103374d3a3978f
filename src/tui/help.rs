//! The `?` screen: every key, and what each kernel knob means in plain
//! words (from the kernel facts readpath follows), so a demo audience and a
//! new user learn the same vocabulary. The README's key table is this list.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Widget, Wrap};

use super::theme::Theme;

/// Every key with what it does.
pub const KEY_HELP: &[(&str, &str)] = &[
    (
        "w",
        "workers: inline -> bound -> unbound (the decrypt queue, or the only one)",
    ),
    ("W", "verify queue: same -> inline -> bound -> unbound"),
    ("h", "high priority workers on/off (nice -20, WQ_HIGHPRI)"),
    ("i", "reader sleep: iowait -> plain (NO_IOWAIT) -> poll"),
    ("e", "engine: io_uring <-> sync pread"),
    ("v", "fs-verity verification on/off"),
    ("d", "fscrypt decryption on/off"),
    ("c", "cipher: aes-256-xts -> aes-256-xts-soft -> adiantum"),
    ("o", "O_DIRECT on/off (off: reads hit the page cache)"),
    ("+ -", "queue depth x2 / /2 (1..1024)"),
    ("] [", "readers +1 / -1"),
    ("> <", "block size x2 / /2 (4K..1M)"),
    ("g G", "background CPU hogs +1 / -1"),
    ("p", "presets: pick one and apply it (Enter)"),
    ("m", "presentation mode: big numbers, high contrast"),
    ("s", "save the current settings as a preset"),
    ("b", "mark the current window as the baseline"),
    ("space", "pause / resume the workload"),
    ("r", "reset the charts (the baseline stays)"),
    ("z Z", "zoom the time window in / out (10s .. 10m)"),
    ("?", "this help (any key closes it)"),
    ("q Esc ^C", "quit (a summary is printed)"),
];

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
    let r = super::render::popup(
        area,
        area.width.saturating_sub(4).min(110),
        area.height.saturating_sub(2),
        buf,
    );
    let row = |(k, what): &(&str, &'static str)| {
        Line::from(vec![
            Span::styled(format!("{k:>9}  "), th.title()),
            Span::styled(*what, th.text()),
        ])
    };
    let lines: Vec<Line> = KEY_HELP
        .iter()
        .map(row)
        .chain([Line::from("")])
        .chain(KNOBS.iter().map(row))
        .collect();
    Paragraph::new(lines)
        .wrap(Wrap { trim: false })
        .block(
            Block::default()
                .borders(Borders::ALL)
                .border_style(th.border())
                .title(Span::styled(
                    " help: keys and knobs (any key closes) ",
                    th.title(),
                )),
        )
        .render(r, buf);
}
