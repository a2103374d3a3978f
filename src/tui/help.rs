//! The `?` screen: every key, and what each kernel knob means in plain
//! words (from the kernel facts readpath follows), so a demo audience and a
//! new user learn the same vocabulary; a glossary of the other words the
//! screens use, and three short recipes. It scrolls, can be searched (`/`),
//! and matches the mode (a replay lists its own keys and not the live
//! settings keys it refuses). The key list is [`super::keys::bindings`], as
//! README.md's key table is. This file is the help's content and its measure
//! (the lines it takes, which bound the scrolling); drawing it is
//! [`super::render`]'s.

pub use super::keys::Mode;
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
        "header",
        "readpath ▶ running and the time; the plan (what runs now: decrypt where -> verify \
         where) · the pods; can: what this kernel and CPU offer, not settings (io_uring, \
         NO_IOWAIT = the plain sleep, AES / SHA instructions, highpri = may set nice -20), \
         ✓ yes ✗ no; the idle governor, cpufreq and iowait✓/✗ = whether anything here reads \
         iowait; ui = the explorer's own CPU and time per frame. Fields drop whole, least \
         needed first, where the terminal is narrow.",
    ),
    (
        "stages",
        "the stages panel: per bio (page cache) or per read, hit = page-cache hits, bio/s; \
         device / queue / decrypt / verify = mean time in each, bar = its share; \
         `fsverity bnd  run 2/8  blk 1  max 3` = a pool (bnd bound, unb unbound): workers \
         running / created (pre-created: a per-CPU pool starts its workers, as the kernel's \
         manager keeps idle ones), blocked now (on a tree page), most blocked at once; \
         narrow `2r 1b/8  ^3`; `tree 90 pg/s blocked 8 ms/s` (blk) = fs-verity tree pages \
         read and time blocked on them; kernel target: `fscrypt_read_queue  172/s  q p99 1.1ms  moved 0%` \
         = items per second, queue wait p99, share run on another CPU; CPU busy █ / \
         iowait ▒ per CPU over the last second.",
    ),
    (
        "axes",
        "latency: log scale, us/ms; throughput: MiB/s left, IOPS right; scheduler: queue \
         p99 left (us/ms), run_delay right in ms of waiting per second (ms/s); time: \
         seconds or minutes before now.",
    ),
    (
        "distribution",
        "the latency distribution panel: the share of reads in each latency bucket \
         (powers of two, us/ms) over \"now\" (since the last change, within the zoom \
         window); once a baseline is marked, a tick on each row is the baseline's share.",
    ),
    (
        "baseline",
        "the baseline panel (b marks one): each metric for the baseline and for \"now\" \
         (since the last change), the change in %, coloured when the two sides' 2 s \
         window values lie apart (better green, worse red), `~` and grey where they \
         overlap (noise), `?` and grey where they lie apart in too few windows for a \
         finding (3 v 3: noise alone does that 10% of the time; a finding needs under \
         5%, 4 v 4 and more); A runs a live A/B, turns of the two settings, judged over \
         rounds as `readpath compare` does.",
    ),
    (
        "verdict",
        "how a change is judged (compare, sweep, A, the baseline panel, a demo's line): \
         the ranges (min-max) of each side's values, interleaved rounds or 2 s windows, \
         overlap: noise; apart: a finding only where noise alone puts them apart under 5% \
         of the time, 2 of the C(n+m, n) orderings of n v m values (3 v 3 10%, 4 v 4 2.9%, \
         5 v 5 0.79%); apart at a larger chance: a hint, not a finding.",
    ),
    (
        "events",
        "the events panel: every change with its marker number ([3] on the charts), notices \
         (fallbacks, refused privileges), the live A/B's rounds and the demo's captions, \
         newest at the bottom; the wheel scrolls it back; the summary on quit holds it whole.",
    ),
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
        "stages panel",
        "each stage's median time and share of a read; then each worker pool: bnd / unb \
         (bound or unbound), run R/W (workers running of the pool's W), blk (workers \
         blocked in an item, reading a tree page), max (the most blocked at once since \
         the last change); narrow, R/W blk B; then each CPU's busy and iowait.",
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

/// The keys of a replay that live keys do not cover (space pauses the
/// replay: the live pause's line is left out).
fn replay_keys() -> Vec<(String, &'static str)> {
    vec![
        ("<- ->".into(), super::keys::SEEK_HELP),
        ("Home".into(), "back to the start"),
        ("space".into(), "pause / resume the replay"),
    ]
}

/// The help's rows as (key, text): the keys (a replay's own, and only the
/// live keys that work there), the knobs, the glossary and the recipes;
/// only rows containing `find` (any case) when it is not empty.
pub fn rows(mode: Mode, find: &str) -> Vec<(String, &'static str)> {
    let replay = mode.replay;
    let mut out: Vec<(String, &'static str)> = Vec::new();
    if replay {
        out.extend(replay_keys());
    }
    out.extend(
        bindings()
            .iter()
            .filter(|b| b.works_in(mode) && !(replay && pauses(b)))
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
            "click a row: its values; a chart: its values then (Esc clears); a panel, then ?: its help; wheel scrolls; --no-mouse"
        },
    ));
    out.push((String::new(), ""));
    out.extend(KNOBS.iter().map(|&(k, w)| (k.to_string(), w)));
    out.extend(GLOSSARY.iter().map(|&(k, w)| (k.to_string(), w)));
    out.extend(held_rows().iter().map(|(k, w)| (k.clone(), w.as_str())));
    // Every setting by its whole name (the panel may show a short form),
    // what `?` on the cursor's row opens at.
    out.push((String::new(), ""));
    out.extend(
        crate::settings::KEYS
            .iter()
            .map(|k| (k.key.to_string(), k.help)),
    );
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

/// How far the model was held against a kernel: one row per shipped map
/// (`assets/held/`, [`crate::output::agreement::held`]), then what holds
/// elsewhere. Made once.
fn held_rows() -> &'static [(String, String)] {
    static ROWS: std::sync::OnceLock<Vec<(String, String)>> = std::sync::OnceLock::new();
    ROWS.get_or_init(|| {
        let mut rows: Vec<(String, String)> = crate::output::agreement::held_by_preset()
            .into_iter()
            .map(|(preset, text)| ("vs kernel".to_string(), format!("{preset}: {text}")))
            .collect();
        rows.push((
            "vs kernel".to_string(),
            "any other configuration: not held against a kernel as a map. `readpath validate` (root) holds the model against this machine's kernel at one point; `readpath sweep --remote vm:KERNEL --across workload.target=model,kernel --across ...` across a map (docs/kernel.md).".to_string(),
        ));
        rows
    })
}

/// The live pause's binding (a replay has its own line for space).
fn pauses(b: &super::keys::Binding) -> bool {
    use super::keys::{Action, Does};
    b.steps
        .iter()
        .any(|s| matches!(s.does, Does::Act(Action::TogglePause)))
}

/// The key column's width; a longer key (a setting's whole name) has a
/// line of its own above its text.
pub const KEY_W: usize = 15;

/// A row's lines `width` wide inside: (key, text) each, the text wrapped
/// at spaces beside the key column; an empty key is a blank line.
pub fn row_lines(key: &str, what: &str, width: usize) -> Vec<(String, String)> {
    if key.is_empty() {
        return vec![(String::new(), String::new())];
    }
    let text_w = width.saturating_sub(KEY_W + 2).max(10);
    let long = key.chars().count() > KEY_W;
    let mut out = Vec::new();
    if long {
        out.push((key.to_string(), String::new()));
    }
    for (i, part) in wrap_words(what, text_w, text_w).into_iter().enumerate() {
        let k = if i == 0 && !long { key } else { "" };
        out.push((k.to_string(), part));
    }
    out
}

/// How many lines the help takes `width` wide inside (the most it can
/// scroll, with a screen's worth of slack, is this).
pub fn line_count(mode: Mode, find: &str, width: usize) -> usize {
    rows(mode, find)
        .iter()
        .map(|(k, w)| row_lines(k, w, width).len())
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys_of(mode: Mode) -> Vec<String> {
        rows(mode, "")
            .into_iter()
            .take_while(|(k, _)| !k.is_empty())
            .map(|(k, _)| k)
            .collect()
    }

    /// The help says how far each shipped map held the model against a
    /// kernel, from the maps themselves, and what holds elsewhere.
    #[test]
    fn the_help_says_how_far_the_model_was_held_against_a_kernel() {
        let rows = rows(Mode::default(), "vs kernel");
        let said = crate::output::agreement::held_by_preset();
        assert_eq!(rows.len(), said.len() + 1, "{rows:?}");
        for ((preset, text), row) in said.iter().zip(&rows) {
            assert_eq!(row.1, format!("{preset}: {text}"));
            assert!(row.1.contains("Linux 6.1"), "{row:?}");
        }
        assert!(
            rows.last()
                .unwrap()
                .1
                .starts_with("any other configuration")
        );
    }

    /// Keys in context: a replay lists its own keys (the seek step as the
    /// replay takes it) and none it refuses; `R` only for a remote
    /// workload; live, every other key.
    #[test]
    fn the_help_lists_only_the_keys_that_work_in_the_mode() {
        let live = keys_of(Mode::default());
        let replay = keys_of(Mode {
            replay: true,
            remote: false,
        });
        let remote = keys_of(Mode {
            replay: false,
            remote: true,
        });
        for k in ["w", "p", "s", "x", "B", "A", ":", "Enter"] {
            assert!(
                live.iter().any(|l| l.split(' ').any(|p| p == k)),
                "live {k}: {live:?}"
            );
            assert!(
                !replay.iter().any(|l| l.split(' ').any(|p| p == k)),
                "replay {k}: {replay:?}"
            );
        }
        assert!(
            !live.iter().any(|l| l == "R") && remote.iter().any(|l| l == "R"),
            "{live:?}"
        );
        assert!(replay.iter().any(|l| l == "b") && replay.iter().any(|l| l == "?"));
        // One line for space in a replay: the replay's own.
        assert_eq!(replay.iter().filter(|l| l.as_str() == "space").count(), 1);
        assert!(!replay.iter().any(|l| l == "␣"), "{replay:?}");
        let seek = rows(
            Mode {
                replay: true,
                remote: false,
            },
            "seek",
        );
        assert_eq!(seek.len(), 1);
        assert!(
            seek[0]
                .1
                .contains(&format!("{:.0} s", crate::tui::keys::SEEK_S)),
            "{seek:?}"
        );
    }

    /// `?` then `/header`, `/stages`, `/blk`: every code on screen is
    /// explained in the app.
    #[test]
    fn help_search_explains_the_header_and_the_stages_codes() {
        for find in [
            "header",
            "stages",
            "blk",
            "can",
            "q p99",
            "axes",
            "pre-created",
        ] {
            assert!(!rows(Mode::default(), find).is_empty(), "{find}");
        }
    }
}
