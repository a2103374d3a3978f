//! The `?` screen: every key, and what each kernel knob means in plain
//! words (from the kernel facts readpath follows), so a demo audience and a
//! new user learn the same vocabulary; a glossary of the other words the
//! screens use, and three short recipes. It scrolls, can be searched (`/`),
//! and matches the mode (a replay lists its own keys and not the live
//! settings keys it refuses). The key list is [`super::keys::bindings`], as
//! README.md's key table is. This file is the help's content and its measure
//! (the lines it takes, which bound the scrolling); drawing it is
//! [`super::render`]'s.

use super::keys::bindings;
use super::text::wrap_words;

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

/// More words for what the screens and settings say, beyond the knobs.
pub const GLOSSARY: &[(&str, &str)] = &[
    (
        "hogs",
        "CPU-bound background threads (g / G), the load a phone or a busy server has: \
         they compete with the workers for CPU time, which is what makes run_delay grow.",
    ),
    (
        "readers",
        "threads issuing the reads (] / [), each with its own io_uring (or pread) and \
         its own queue depth.",
    ),
    (
        "queue depth",
        "reads in flight per reader (+ / -): 1 waits for each read; more keep the \
         device and the workers busy at once.",
    ),
    (
        "verify_mode",
        "where verification runs when decryption is on too (W): same = in the decrypt \
         work item, after it; inline = in the reader; bound / unbound = its own queue, \
         as ext4 does (fsverity_read_queue).",
    ),
    (
        "max_active",
        "how many unbound workers may run at once (0 = one per online CPU), shared out \
         over the affinity scope's pods.",
    ),
    (
        "queue p99",
        "the 99th percentile of the time work items waited in a queue before a worker \
         started them, both queues summed (decrypt and verify) when both are on.",
    ),
    (
        "target",
        "k: readpath's model, or the running kernel's own fscrypt and fs-verity on a \
         real ext4 file (root), its queues traced; K turns the kernel's affinity scope.",
    ),
];

/// Three short ways in.
pub const RECIPES: &[(&str, &str)] = &[
    (
        "verify only",
        "d (decryption off), then w: bound vs unbound verification alone; b first to \
         compare, B flips back and forth, A takes interleaved rounds for a verdict.",
    ),
    (
        "slow cipher",
        "p fscrypt-slow-cipher, b, then w: a software AES on a bound vs an unbound queue \
         (the 2018 fscrypt change).",
    ),
    (
        "vs the kernel",
        "b on the model, then k: the same reads through the running kernel, compared \
         in the baseline panel (root).",
    ),
];

/// The keys of a replay that live keys do not cover.
const REPLAY_KEYS: &[(&str, &str)] = &[
    ("<- ->", "seek 5 s back / forward"),
    ("Home", "back to the start"),
    ("space", "pause / resume the replay"),
];

/// The help's rows as (key, text): the keys (a replay's own, and only the
/// live keys that work there), the knobs, the glossary and the recipes;
/// only rows containing `find` (any case) when it is not empty.
pub fn rows(replay: bool, find: &str) -> Vec<(String, &'static str)> {
    let mut out: Vec<(String, &'static str)> = Vec::new();
    if replay {
        out.extend(REPLAY_KEYS.iter().map(|&(k, w)| (k.to_string(), w)));
    }
    out.extend(
        bindings()
            .iter()
            .filter(|b| !replay || (b.setting.is_none() && !changes_settings(b)))
            .map(|b| (b.label(), b.help)),
    );
    if !replay {
        out.push((
            "Alt+key".to_string(),
            "steps a cycle backwards (Alt-w, Alt-W, Alt-i...); on an on/off toggle, as the key",
        ));
    }
    out.push((
        "mouse".to_string(),
        if replay {
            "click a chart: its values at that time (Esc clears); wheel: help, events (--no-mouse: off)"
        } else {
            "click a row: its values; a chart: its values then (Esc clears); wheel scrolls; --no-mouse"
        },
    ));
    out.push((String::new(), ""));
    out.extend(KNOBS.iter().map(|&(k, w)| (k.to_string(), w)));
    out.extend(GLOSSARY.iter().map(|&(k, w)| (k.to_string(), w)));
    out.push((String::new(), ""));
    out.extend(RECIPES.iter().map(|&(k, w)| (format!("> {k}"), w)));
    let find = find.to_lowercase();
    if find.is_empty() {
        return out;
    }
    out.into_iter()
        .filter(|(k, w)| {
            !k.is_empty() && (k.to_lowercase().contains(&find) || w.to_lowercase().contains(&find))
        })
        .collect()
}

/// A binding that only opens a way to change settings (the chooser, the
/// `:` prompt): a replay refuses it, so its help leaves it out.
fn changes_settings(b: &super::keys::Binding) -> bool {
    use super::keys::{Action, Does};
    b.steps.iter().any(|s| {
        matches!(
            s.does,
            Does::Act(Action::OpenChooser) | Does::Act(Action::OpenPrompt)
        )
    })
}

/// How many lines the help takes `width` wide inside (the most it can
/// scroll, with a screen's worth of slack, is this).
pub fn line_count(replay: bool, find: &str, width: usize) -> usize {
    let text_w = width.saturating_sub(17).max(10);
    rows(replay, find)
        .iter()
        .map(|(k, w)| {
            if k.is_empty() {
                1
            } else {
                wrap_words(w, text_w, text_w).len()
            }
        })
        .sum()
}
