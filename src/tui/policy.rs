//! What a key may do in the explorer: the action a key maps to (from
//! [`keys::bindings`]), a settings key's change with the keys that conflict
//! with it following it, refused with why when the engine would refuse it
//! or it would change nothing here ([`crate::engine::resolve()`] decides;
//! this file asks it), and the quit confirmation that keeps a marked
//! baseline from being lost to one stray `q`. Free functions over the
//! part of the explorer's state they read ([`Running`]: the settings
//! running, the machine, the resolver's answer; for quitting, whether a
//! baseline is marked and a first `q` asked), which keep none of their
//! own: `App::quit_key` keeps the question asked. No terminal: key and
//! state in, action or reason out.

use ratatui::crossterm::event::KeyEvent;

use super::keys::{self, Action, Does};
use super::state::Running;
use crate::settings::Settings;

/// Maps a key to an action, given the settings as requested: what the key
/// does comes from [`keys::bindings`]. Pure: the tests drive every binding
/// through it. Ctrl-Z is [`Action::None`] here: the terminal loop suspends
/// before a key gets this far.
pub fn action_for_key(key: KeyEvent, settings: &Settings, cpus: usize) -> Action {
    let Some(does) = keys::does(key) else {
        return Action::None;
    };
    match does {
        Does::Act(Action::Suspend) => Action::None,
        Does::Act(a) => a.clone(),
        Does::Change(f) => match change(f, settings, cpus) {
            Ok(s) => Action::Apply(Box::new(s)),
            Err(why) => Action::Refuse(why.to_string()),
        },
    }
}

/// The settings a change leads to, or why it cannot be made (a step past
/// a limit). Not validated here: [`crate::engine::Engine::apply`] validates
/// once, and a refusal there leaves the running workload as it was.
fn change(
    f: &keys::Change,
    s: &Settings,
    _cpus: usize,
) -> Result<Settings, crate::settings::StepError> {
    f.apply(s)
}

/// What a key's action does to quitting: see [`quit_answer`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quit {
    /// Quit now.
    Now,
    /// Not yet: ask first, saying this; the next `q` quits.
    Ask(&'static str),
    /// Not a quit (and a first `q`'s question is dropped).
    Stay,
}

/// Whether a key's action quits, given whether a baseline is marked
/// (`baseline`) and whether a first `q` already asked (`armed`): Ctrl-C at
/// once; `q` at once with no baseline to lose, else the first `q` asks and
/// a second quits. Any other key is no quit (and the question lapses).
pub fn quit_answer(action: &Action, baseline: bool, armed: bool) -> Quit {
    match action {
        Action::QuitNow => Quit::Now,
        Action::Quit if baseline && !armed => Quit::Ask("q again quits; the baseline goes with it"),
        Action::Quit => Quit::Now,
        _ => Quit::Stay,
    }
}

/// Why `n` (the settings with `key` changed) cannot run here, as the
/// engine would refuse it ([`Settings::validate`], then
/// [`crate::engine::resolve()`] on this machine and filesystem), or would
/// run `key` as something else (the reason the settings panel greys a
/// setting with), given what `run`s now. None: it can.
pub fn refusal(run: &Running, n: &Settings, key: &str) -> Option<String> {
    if let Err(e) = n.validate(run.cpus().max(1)) {
        return Some(e.to_string());
    }
    let fs = crate::engine::DataFs::inferred(run.settings(), run.effective());
    let new = match crate::engine::resolve(n, run.features(), &fs) {
        Err(e) => return Some(e.to_string()),
        Ok(r) => r,
    };
    if let Some(why) = new.limit(key)
        && new.effective.get(key) != n.get(key)
    {
        return Some(why.to_string());
    }
    // A value that runs exactly as the current one changes nothing here.
    let now = run.resolution()?;
    (n != run.settings() && new.runs_like(now)).then(|| {
        new.limit(key)
            .unwrap_or("it runs the same as the current value here")
            .to_string()
    })
}

/// What a key does given what `run`s now: a settings key's change, with
/// the keys that conflict with it following it
/// ([`crate::engine::reconcile`]), or refused with why when it cannot run
/// or changes nothing (no marker).
///
/// A cycle's value that would run exactly as the current one here (a
/// value the target runs as another: `inline` on a kernel whose queues
/// readpath's lab switches flip) is stepped over to the next, so the key
/// still moves; refused only when no value of the cycle would.
pub fn key_action(run: &Running, key: KeyEvent) -> Action {
    let current = run.settings();
    let mut from = current.clone();
    let mut first_refusal = None;
    for _ in 0..8 {
        let action = action_for_key(key, &from, run.cpus());
        let Action::Apply(mut n) = action else {
            return first_refusal.unwrap_or(action);
        };
        let Some(changed) = current.diff(&n).first().map(|c| c.key.clone()) else {
            return first_refusal.unwrap_or(Action::None);
        };
        crate::engine::reconcile(&mut n, &changed);
        let Some(why) = refusal(run, &n, &changed) else {
            return Action::Apply(n);
        };
        let refused = Action::Refuse(format!("{changed}: {why}"));
        let cycles = keys::does(key).is_some_and(|d| {
            matches!(d, Does::Change(c)
                if matches!(c.setting.bind.map(|b| b.step), Some(crate::settings::Step::Cycle(_))))
        });
        if !cycles || !runs_as_now(run, &n, &changed) {
            return first_refusal.unwrap_or(refused);
        }
        first_refusal.get_or_insert(refused);
        from = *n;
    }
    first_refusal.unwrap_or(Action::None)
}

/// Whether `n` would run exactly as what `run`s now, `key` not greyed
/// with a reason of its own (a value greyed here is refused with that
/// reason, not stepped over).
fn runs_as_now(run: &Running, n: &Settings, key: &str) -> bool {
    let fs = crate::engine::DataFs::inferred(run.settings(), run.effective());
    match (
        crate::engine::resolve(n, run.features(), &fs),
        run.resolution(),
    ) {
        (Ok(new), Some(now)) => new.limit(key).is_none() && new.runs_like(now),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::{EngineKind, SleepMode, VerifyMode, WorkerMode};
    use ratatui::crossterm::event::{KeyCode, KeyModifiers};

    fn key(c: char) -> KeyEvent {
        KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE)
    }

    fn apply(c: char, s: &Settings) -> Settings {
        match action_for_key(key(c), s, 2) {
            Action::Apply(n) => *n,
            other => panic!("key {c:?}: expected Apply, got {other:?}"),
        }
    }

    #[test]
    fn every_settings_key_changes_exactly_its_setting() {
        let base = Settings::default();
        let table: &[(char, &str, &str)] = &[
            ('w', "workers.mode", "inline"),
            ('W', "workers.verify_mode", "unbound"),
            ('h', "workers.highpri", "false"),
            ('i', "workload.sleep", "plain"),
            ('e', "workload.engine", "sync"),
            ('v', "pipeline.verity", "false"),
            ('d', "pipeline.decrypt", "false"),
            ('c', "pipeline.cipher", "aes-256-xts-soft"),
            ('o', "workload.direct", "true"),
            ('+', "workload.queue_depth", "2"),
            (']', "workload.readers", "2"),
            ('>', "workload.block_size", "8K"),
            ('g', "load.hogs", "1"),
        ];
        for &(c, k, v) in table {
            let n = apply(c, &base);
            let changes = base.diff(&n);
            assert_eq!(changes.len(), 1, "key {c:?}: {changes:?}");
            assert_eq!(changes[0].key, k, "key {c:?}");
            assert_eq!(changes[0].to, v, "key {c:?}");
        }
    }

    /// The values a setting takes pressing `key` `n` times from the default.
    fn cycle<T>(key: char, n: usize, get: fn(&Settings) -> T) -> Vec<T> {
        let mut s = Settings::default();
        let mut seen = vec![get(&s)];
        for _ in 0..n {
            s = apply(key, &s);
            seen.push(get(&s));
        }
        seen
    }

    #[test]
    fn cycles_wrap_around() {
        use VerifyMode as V;
        use WorkerMode as W;
        let modes = cycle('w', 3, |s| s.workers.mode);
        assert_eq!(modes, [W::Unbound, W::Inline, W::Bound, W::Unbound]);
        let verify = cycle('W', 4, |s| s.workers.verify_mode);
        assert_eq!(verify, [V::Bound, V::Unbound, V::Same, V::Inline, V::Bound]);
    }

    #[test]
    fn limits_are_refused_with_a_reason() {
        let mut s = Settings::default();
        assert!(
            matches!(action_for_key(key('-'), &s, 2), Action::Refuse(r) if r.contains("minimum"))
        );
        assert!(matches!(action_for_key(key('['), &s, 2), Action::Refuse(_)));
        assert!(matches!(action_for_key(key('<'), &s, 2), Action::Refuse(_)));
        assert!(matches!(action_for_key(key('G'), &s, 2), Action::Refuse(_)));
        s.workload.queue_depth = 1024;
        assert!(matches!(action_for_key(key('+'), &s, 2), Action::Refuse(r) if r.contains("1024")));
        s.workload.block_size = 1 << 20;
        assert!(matches!(action_for_key(key('>'), &s, 2), Action::Refuse(_)));
    }

    /// What runs: `s`, on the fixture's machine (high priority refused)
    /// or `features`.
    fn running(s: &Settings, features: Option<crate::sys::Features>) -> Running {
        let f = features.unwrap_or_else(crate::sys::testing::fixture_features);
        Running::new(s.clone(), s.clone(), f, 2)
    }

    #[test]
    fn w_flips_a_switchable_kernel_s_queue_and_is_refused_on_another() {
        let mut s = Settings::default();
        s.workload.target = crate::settings::Target::Kernel;
        s.pipeline.decrypt = false;
        s.workers.mode = WorkerMode::Unbound;
        let mut f = crate::sys::testing::fixture_features();
        f.kernel_switches = true;
        let mut run = running(&s, Some(f));
        // unbound -> inline runs as unbound on the kernel: stepped over.
        let Action::Apply(n) = key_action(&run, key('w')) else {
            panic!("w refused on a kernel with switches")
        };
        assert_eq!(n.workers.mode, WorkerMode::Bound);
        run.set((*n).clone(), (*n).clone());
        let Action::Apply(n) = key_action(&run, key('w')) else {
            panic!("w refused")
        };
        assert_eq!(n.workers.mode, WorkerMode::Unbound);
        // A stock kernel: the queue is fixed, w says why.
        let stock = running(&s, None);
        let Action::Refuse(why) = key_action(&stock, key('w')) else {
            panic!("w not refused on a stock kernel")
        };
        assert!(why.contains("lab build --switches"), "{why}");
    }

    #[test]
    fn sync_engine_takes_sleep_along_and_refuses_i() {
        let s = Settings::default();
        let mut run = running(&s, None);
        let Action::Apply(sync) = key_action(&run, key('e')) else {
            panic!("e refused")
        };
        assert_eq!(sync.workload.engine, EngineKind::Sync);
        let mut plain = s.clone();
        plain.workload.sleep = SleepMode::Plain;
        run.set(plain.clone(), plain);
        let Action::Apply(s2) = key_action(&run, key('e')) else {
            panic!("e refused")
        };
        assert_eq!(s2.workload.engine, EngineKind::Sync);
        assert_eq!(s2.workload.sleep, SleepMode::Iowait, "sleep follows engine");
        run.set((*sync).clone(), (*sync).clone());
        let i = key_action(&run, key('i'));
        assert!(
            matches!(&i, Action::Refuse(r) if r.starts_with("workload.sleep") && r.contains("always sleep as iowait")),
            "{i:?}"
        );
        assert!(
            matches!(key_action(&run, key('e')), Action::Apply(n) if n.workload.engine == EngineKind::Uring)
        );
    }

    /// A key whose setting does nothing in the current configuration says
    /// why and changes nothing (no marker): W with decryption off, w and h
    /// on the kernel target, h where priority cannot be raised.
    #[test]
    fn a_key_that_changes_nothing_here_is_refused_with_why() {
        let mut verity_only = Settings::default();
        verity_only.pipeline.decrypt = false;
        let mut run = running(&verity_only, None);
        let w = key_action(&run, key('W'));
        assert_eq!(
            w,
            Action::Refuse(
                "workers.verify_mode: used only when decrypt and verity are both on".into()
            )
        );
        assert!(matches!(key_action(&run, key('w')), Action::Apply(_)));

        let mut kernel = Settings::default();
        kernel.workload.target = crate::settings::Target::Kernel;
        run.set(kernel.clone(), kernel);
        for c in ['w', 'h', 'W', 'a'] {
            let why = key_action(&run, key(c));
            assert!(
                matches!(&why, Action::Refuse(r) if r.contains("the kernel")),
                "{c}: {why:?}"
            );
        }
        assert!(matches!(key_action(&run, key('K')), Action::Apply(_)));

        let mut f = crate::sys::testing::fixture_features();
        f.highpri = false;
        f.highpri_reason = Some("no CAP_SYS_NICE".into());
        let mut low = Settings::default();
        low.workers.highpri = false;
        let run = running(&low, Some(f));
        assert_eq!(
            key_action(&run, key('h')),
            Action::Refuse("workers.highpri: no CAP_SYS_NICE".into())
        );
    }

    /// q quits at once without a baseline; with one, the first q only
    /// asks, a second q quits; Ctrl-C never asks.
    #[test]
    fn quitting_asks_once_when_a_baseline_would_be_lost() {
        assert_eq!(quit_answer(&Action::Quit, false, false), Quit::Now);
        assert!(matches!(
            quit_answer(&Action::Quit, true, false),
            Quit::Ask(why) if why.contains("q again")
        ));
        assert_eq!(quit_answer(&Action::Quit, true, true), Quit::Now);
        assert_eq!(quit_answer(&Action::ZoomIn, true, true), Quit::Stay);
        assert_eq!(quit_answer(&Action::QuitNow, true, false), Quit::Now);
        assert_eq!(quit_answer(&Action::Escape, false, false), Quit::Stay);
    }

    #[test]
    fn control_keys() {
        let s = Settings::default();
        let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
        assert_eq!(action_for_key(ctrl_c, &s, 2), Action::QuitNow);
        assert_eq!(action_for_key(key('q'), &s, 2), Action::Quit);
        assert_eq!(
            action_for_key(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE), &s, 2),
            Action::Escape
        );
        assert_eq!(action_for_key(key(' '), &s, 2), Action::TogglePause);
        assert_eq!(action_for_key(key('b'), &s, 2), Action::MarkBaseline);
        assert_eq!(action_for_key(key('r'), &s, 2), Action::ResetCharts);
        assert_eq!(action_for_key(key('z'), &s, 2), Action::ZoomIn);
        assert_eq!(action_for_key(key('Z'), &s, 2), Action::ZoomOut);
        assert_eq!(action_for_key(key('?'), &s, 2), Action::ToggleHelp);
        assert_eq!(action_for_key(key('x'), &s, 2), Action::DropCache);
        assert_eq!(action_for_key(key('X'), &s, 2), Action::None);
    }
}
