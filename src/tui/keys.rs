//! The explorer's key bindings, spelled once. Every key the user can press
//! on the main screen is a row of [`bindings`]: its keys, what it does, the
//! setting it changes, its footer label and its help text. The help screen's
//! key list, the footer, the settings panel's key column and
//! [`super::policy::action_for_key`] are all derived from this table, and a test
//! checks that README.md's "### Keys" table lists exactly its keys, so the
//! five places that show the bindings cannot drift apart.
//!
//! Rules of the table:
//!
//! - A [`Binding`] is one line of the help. It has one [`Step`] per thing it
//!   can do (`+` and `-` are two steps of the queue-depth binding; `q` and
//!   Ctrl-C are two steps that quit, `q` asking first when a baseline would
//!   be lost).
//! - A step's first key is the one shown (help, footer, settings panel,
//!   README's key column); its other keys are aliases, accepted but never
//!   shown on screen: `=` and `_` (`+` and `-` without Shift), `.` and `,`
//!   (`>` and `<` without Shift), F1 for `?`, Ctrl-D for quit. README.md names
//!   an alias in its row's "does" column, as "(also `=` / `_`)"; the test
//!   checks that too.
//! - The compact form of a binding's keys (footer, settings panel) joins its
//!   shown keys without spaces, space written `␣`, and a pair of brackets
//!   written opening first (`[]` for `]` / `[`), so it reads as a pair.
//! - The footer lists the [`Footer::IfRoom`] bindings in table order, as
//!   many as fit, and always ends with the [`Footer::Always`] ones (by
//!   their first key). So the table's order is the footer's, most used
//!   first, and the help's.
//!
//! - Alt+key steps a setting's cycle backwards: a single-step settings
//!   binding has a `back` change (the previous value; for an on/off toggle
//!   the toggle itself), which [`lookup`] answers for [`Key::Alt`]. Alt
//!   with any other key (Alt-q, Alt-+) does nothing, and never quits.
//!
//! Not in the table: the keys of the overlays (the preset picker's arrows
//! and Enter, the name prompt's typing, Esc and `?` closing the help, the
//! value chooser and the `:` prompt) and of replay (Left, Right, Home) and
//! demos (`n`), which belong to their own screens; and the mouse. Ctrl-Z is
//! in the table, but the terminal loop ([`super::run_with`]) does the
//! suspending, since it owns the terminal.

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use std::sync::OnceLock;

use crate::settings::{self, Setting, Settings};

/// A key as the user presses it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    /// A plain key (`' '` is the space bar).
    Char(char),
    /// Ctrl with a letter, lowercase (as the terminal reports it).
    Ctrl(char),
    /// Escape.
    Esc,
    /// A function key.
    F(u8),
    /// The Up arrow.
    Up,
    /// The Down arrow.
    Down,
    /// The Left arrow.
    Left,
    /// The Right arrow.
    Right,
    /// Enter.
    Enter,
    /// Tab.
    Tab,
    /// Shift-Tab.
    BackTab,
    /// Alt with a plain key (steps a cycle backwards, see [`lookup`]).
    Alt(char),
}

use Key::{Alt, BackTab, Char, Ctrl, Down, Enter, Esc, F, Left, Right, Tab, Up};

impl Key {
    /// The key of a key event, if it is one the table can bind: Ctrl with a
    /// character is [`Key::Ctrl`], Alt with a character [`Key::Alt`] (never
    /// the plain key: Alt-q must not quit), Alt with anything else nothing.
    pub fn of(event: KeyEvent) -> Option<Key> {
        if event.modifiers.contains(KeyModifiers::CONTROL) {
            return match event.code {
                KeyCode::Char(c) => Some(Ctrl(c)),
                _ => None,
            };
        }
        if event.modifiers.contains(KeyModifiers::ALT) {
            return match event.code {
                KeyCode::Char(c) => Some(Alt(c)),
                _ => None,
            };
        }
        match event.code {
            KeyCode::Char(c) => Some(Char(c)),
            KeyCode::Esc => Some(Esc),
            KeyCode::F(n) => Some(F(n)),
            KeyCode::Up => Some(Up),
            KeyCode::Down => Some(Down),
            KeyCode::Left => Some(Left),
            KeyCode::Right => Some(Right),
            KeyCode::Enter => Some(Enter),
            KeyCode::Tab => Some(Tab),
            KeyCode::BackTab => Some(BackTab),
            _ => None,
        }
    }

    /// As the help screen writes it: `w`, `space`, `Esc`, `^C`, `F1`.
    pub fn label(self) -> String {
        match self {
            Char(' ') => "space".into(),
            Char(c) => c.to_string(),
            Ctrl(c) => format!("^{}", c.to_ascii_uppercase()),
            Esc => "Esc".into(),
            F(n) => format!("F{n}"),
            Up => "↑".into(),
            Down => "↓".into(),
            Left => "←".into(),
            Right => "→".into(),
            Enter => "Enter".into(),
            Tab => "Tab".into(),
            BackTab => "Shift-Tab".into(),
            Alt(c) => format!("Alt-{c}"),
        }
    }

    /// As the footer and the settings panel write it: one cell where it
    /// can be (`␣` for space).
    pub fn glyph(self) -> String {
        match self {
            Char(' ') => "␣".into(),
            Tab => "⇥".into(),
            BackTab => "⇤".into(),
            k => k.label(),
        }
    }

    /// As README.md writes it: `` `w` ``, space, Esc, Ctrl-C, F1.
    #[cfg(test)]
    pub fn readme(self) -> String {
        match self {
            Char(' ') => "space".into(),
            Char(c) => format!("`{c}`"),
            Ctrl(c) => format!("Ctrl-{}", c.to_ascii_uppercase()),
            Esc => "Esc".into(),
            F(n) => format!("F{n}"),
            Up => "Up".into(),
            Down => "Down".into(),
            Left => "Left".into(),
            Right => "Right".into(),
            Enter => "Enter".into(),
            Tab => "Tab".into(),
            BackTab => "Shift-Tab".into(),
            Alt(c) => format!("Alt-{c}"),
        }
    }
}

/// A step of a setting through the explorer key of its [`Setting`]
/// ([`settings::Bind`]): forwards or back through its cycle, or up or down
/// its range. The step itself is the setting's ([`Setting::step`]).
#[derive(Debug, Clone, Copy)]
pub struct Change {
    /// The setting.
    pub setting: &'static Setting,
    /// The first key of a pair (double, add one); a cycle's key.
    pub up: bool,
    /// Alt: a cycle's step back.
    pub back: bool,
}

impl Change {
    /// The settings the step leads to from `s`, or why it goes nowhere.
    pub fn apply(&self, s: &Settings) -> Result<Settings, crate::settings::StepError> {
        self.setting.step(s, self.up, self.back)
    }
}

/// What a key asks for. Settings changes carry the complete new settings.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Nothing to do.
    None,
    /// Leave the explorer; asks once (q again) when a baseline would be
    /// lost with the session.
    Quit,
    /// Leave the explorer at once (Ctrl-C, Ctrl-D).
    QuitNow,
    /// Esc on the main screen: popups close with it, it never quits.
    Escape,
    /// Stop the process as a shell job (done by the terminal loop, which
    /// owns the terminal; [`super::policy::action_for_key`] answers `None`).
    Suspend,
    /// Pause or resume the workload.
    TogglePause,
    /// Mark the current window as the baseline.
    MarkBaseline,
    /// A/B: run the baseline's settings, or back to the ones before.
    FlipBaseline,
    /// The live A/B: alternate the baseline's settings and the current
    /// ones in timed turns and judge the rounds; or stop it.
    ToggleAb,
    /// Clear the charts (the baseline is kept).
    ResetCharts,
    /// Drop every page of the page cache (`echo 1 > drop_caches`).
    DropCache,
    /// Start a remote workload again after its connection was lost.
    Reconnect,
    /// Open or close the timeline (where each work item ran).
    ToggleTimeline,
    /// Start a Perfetto trace of where each work item ran, or stop it and
    /// write it.
    ToggleTrace,
    /// With the timeline open: choose the next (true) or previous work item.
    ChooseItem(bool),
    /// Narrow the time window.
    ZoomIn,
    /// Widen the time window.
    ZoomOut,
    /// Show or hide the help.
    ToggleHelp,
    /// Enter or leave presentation mode.
    TogglePresent,
    /// Open the preset picker.
    OpenPicker,
    /// Move the settings panel's cursor up a row.
    CursorUp,
    /// Move the settings panel's cursor down a row.
    CursorDown,
    /// Focus the next panel of the screen (Tab).
    FocusNext,
    /// Focus the previous panel (Shift-Tab).
    FocusPrev,
    /// Open the value chooser of the setting under the cursor.
    OpenChooser,
    /// Open the `:` prompt (`:set section.key=value`).
    OpenPrompt,
    /// Ask for a name to save the current settings as a preset.
    StartSave,
    /// Run the workload with these settings.
    Apply(Box<Settings>),
    /// The key was understood but refused, with why.
    Refuse(String),
}

/// What a key does: an action of the explorer, or a change of the settings.
#[derive(Debug, Clone)]
pub enum Does {
    /// An action that needs no settings (quit, pause, zoom...).
    Act(Action),
    /// Change the binding's setting.
    Change(Change),
}

/// One thing a binding does, and the keys that do it.
#[derive(Debug, Clone)]
pub struct Step {
    /// The first is shown; the others are aliases.
    pub keys: &'static [Key],
    /// What pressing one does.
    pub does: Does,
    /// What Alt with its first key does: the change one step back in the
    /// setting's cycle (single-step settings bindings only).
    pub back: Option<Does>,
}

/// A step that acts on the explorer.
const fn act(keys: &'static [Key], a: Action) -> Step {
    Step {
        keys,
        does: Does::Act(a),
        back: None,
    }
}

/// Whether and how a binding shows in the footer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Footer {
    /// Not in the footer.
    None,
    /// In the footer while there is room, in table order.
    IfRoom(&'static str),
    /// In the footer after every [`Footer::IfRoom`] one, while there is
    /// still room (the cursor, Enter, `:`: ways in rather than changes).
    Last(&'static str),
    /// Always at the footer's right end, with the binding's first key only
    /// (`q quit`, not all of `q Esc ^C`).
    Always(&'static str),
}

/// One line of the help: a key or a few, what they do, and where they show.
#[derive(Debug, Clone)]
pub struct Binding {
    /// What the keys do, one step each.
    pub steps: &'static [Step],
    /// The setting the keys change (`workers.mode`), if they change one.
    pub setting: Option<&'static str>,
    /// The footer's label.
    pub footer: Footer,
    /// The help screen's line.
    pub help: &'static str,
}

/// How far a replay's arrow keys move, seconds of recording.
pub const SEEK_S: f64 = 10.0;
/// The help's line for a replay's seek keys (a test holds it to
/// [`SEEK_S`]).
pub const SEEK_HELP: &str = "seek 10 s back / forward";

/// Where the explorer runs, for which keys work there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Mode {
    /// A recording replayed: nothing acts on a workload.
    pub replay: bool,
    /// The workload runs on another machine (`--remote`): `R` reconnects.
    pub remote: bool,
}

impl Action {
    /// Whether it acts on a running workload (its settings, its cache, its
    /// connection, or the ways to change them): a replay refuses it.
    pub fn needs_workload(&self) -> bool {
        matches!(
            self,
            Action::Apply(_)
                | Action::Refuse(_)
                | Action::OpenPicker
                | Action::StartSave
                | Action::FlipBaseline
                | Action::ToggleAb
                | Action::DropCache
                | Action::Reconnect
                | Action::OpenChooser
                | Action::OpenPrompt
        )
    }
}

impl Binding {
    /// Whether its keys do something in `mode` (the footer and the help
    /// list only those; a replay refuses the others with why, and `R`
    /// says it is for a remote workload). A setting that does nothing on
    /// the current read path or target is the caller's to leave out
    /// (`Running::inert`).
    pub fn works_in(&self, mode: Mode) -> bool {
        let needs = self.setting.is_some()
            || self.steps.iter().any(|s| match &s.does {
                Does::Act(a) => a.needs_workload(),
                Does::Change(_) => true,
            });
        let reconnect = self
            .steps
            .iter()
            .any(|s| matches!(s.does, Does::Act(Action::Reconnect)));
        !(mode.replay && needs) && (!reconnect || mode.remote)
    }

    /// The keys shown: each step's first key.
    pub fn shown(&self) -> impl Iterator<Item = Key> + '_ {
        self.steps.iter().filter_map(|s| s.keys.first().copied())
    }

    /// The aliases: each step's keys after the first.
    #[cfg(test)]
    pub fn aliases(&self) -> impl Iterator<Item = Key> + '_ {
        self.steps
            .iter()
            .flat_map(|s| s.keys.iter().skip(1).copied())
    }

    /// The help screen's key column: `w`, `+ -`, `q Esc ^C`.
    pub fn label(&self) -> String {
        self.shown().map(Key::label).collect::<Vec<_>>().join(" ")
    }

    /// The footer's and the settings panel's form: `w`, `+-`, `[]`, `␣`.
    pub fn compact(&self) -> String {
        let mut keys: Vec<Key> = self.shown().collect();
        if let [Char(a), Char(b)] = keys[..]
            && matches!((a, b), (']', '[') | ('>', '<') | (')', '(') | ('}', '{'))
        {
            keys.swap(0, 1);
        }
        keys.into_iter().map(Key::glyph).collect()
    }
}

/// Every binding, in the help screen's (and the footer's) order: the
/// settings keys of [`settings::KEYS`] by their rank, then [`ACTIONS`].
pub fn bindings() -> &'static [Binding] {
    static ALL: OnceLock<Vec<Binding>> = OnceLock::new();
    ALL.get_or_init(|| {
        let mut keyed: Vec<&'static Setting> =
            settings::KEYS.iter().filter(|k| k.bind.is_some()).collect();
        keyed.sort_by_key(|k| k.bind.map_or(0, |b| b.rank));
        keyed
            .into_iter()
            .map(setting_binding)
            .chain(ACTIONS.iter().cloned())
            .collect()
    })
}

/// The binding of a setting's key, from its [`settings::Bind`].
fn setting_binding(k: &'static Setting) -> Binding {
    let bind = k.bind.expect("a setting with a key");
    let change = |up: bool, back: bool| {
        Does::Change(Change {
            setting: k,
            up,
            back,
        })
    };
    let chars = |cs: &[char]| -> &'static [Key] {
        Box::leak(
            cs.iter()
                .map(|&c| Char(c))
                .collect::<Vec<_>>()
                .into_boxed_slice(),
        )
    };
    let steps: Vec<Step> = match bind.step {
        settings::Step::Cycle(c) => vec![Step {
            keys: chars(&[c]),
            does: change(true, false),
            back: Some(change(true, true)),
        }],
        settings::Step::Double { up, down } | settings::Step::Add { up, down } => vec![
            Step {
                keys: chars(up),
                does: change(true, false),
                back: None,
            },
            Step {
                keys: chars(down),
                does: change(false, false),
                back: None,
            },
        ],
    };
    Binding {
        steps: Box::leak(steps.into_boxed_slice()),
        setting: Some(k.key.name()),
        footer: bind.footer.map_or(Footer::None, Footer::IfRoom),
        // Made once per process (a OnceLock), so leaking it is bounded.
        help: Box::leak(k.bind_help().into_boxed_str()),
    }
}

/// The bindings that act on the explorer rather than change a setting.
pub const ACTIONS: &[Binding] = &[
    Binding {
        steps: &[
            act(&[Up], Action::CursorUp),
            act(&[Down], Action::CursorDown),
        ],
        setting: None,
        footer: Footer::Last("cursor"),
        help: "move the settings panel's cursor (a click on a row selects it too); with the events panel focused, scroll it",
    },
    Binding {
        steps: &[act(&[Enter], Action::OpenChooser)],
        setting: None,
        footer: Footer::Last("pick"),
        help: "the cursor's setting: pick a value (greyed ones say why not), applied as one change",
    },
    Binding {
        steps: &[act(&[Char(':')], Action::OpenPrompt)],
        setting: None,
        footer: Footer::Last("set"),
        help: ":set section.key=value (or key=value): any setting, as one change; Tab completes, ↑ recalls",
    },
    Binding {
        steps: &[
            act(&[Tab], Action::FocusNext),
            act(&[BackTab], Action::FocusPrev),
        ],
        setting: None,
        footer: Footer::Last("focus"),
        help: "focus the next / previous panel (header, settings, charts, bottom panels, events; a click focuses one too): ? explains it, Esc lets go",
    },
    Binding {
        steps: &[act(&[Char('b')], Action::MarkBaseline)],
        setting: None,
        footer: Footer::IfRoom("baseline"),
        help: "mark the current window as the baseline",
    },
    Binding {
        steps: &[act(&[Char('B')], Action::FlipBaseline)],
        setting: None,
        footer: Footer::None,
        help: "A/B: flip between the baseline's settings and the current ones (back and forth)",
    },
    Binding {
        steps: &[act(&[Char('A')], Action::ToggleAb)],
        setting: None,
        footer: Footer::IfRoom("A/B"),
        help: "live A/B: baseline and current settings take 5 s turns (1.5 s settle dropped), interleaved rounds as compare runs them, a verdict per metric that firms up (ranges apart are a finding from 4 rounds, a hint before); its turns run along the top of the latency chart (▄ baseline, ▁ now); A again stops",
    },
    Binding {
        steps: &[act(&[Char('p')], Action::OpenPicker)],
        setting: None,
        footer: Footer::IfRoom("presets"),
        help: "presets: pick one and apply it (Enter)",
    },
    Binding {
        steps: &[act(&[Char('m')], Action::TogglePresent)],
        setting: None,
        footer: Footer::None,
        help: "presentation mode: big numbers, high contrast",
    },
    Binding {
        steps: &[act(&[Char('s')], Action::StartSave)],
        setting: None,
        footer: Footer::IfRoom("save"),
        help: "save the current settings as a preset",
    },
    Binding {
        steps: &[act(&[Char(' ')], Action::TogglePause)],
        setting: None,
        footer: Footer::IfRoom("pause"),
        help: "pause / resume the workload",
    },
    Binding {
        steps: &[act(&[Char('x')], Action::DropCache)],
        setting: None,
        footer: Footer::None,
        help: "drop the page cache: every page misses again (marked on the charts)",
    },
    Binding {
        steps: &[act(&[Char('R')], Action::Reconnect)],
        setting: None,
        footer: Footer::None,
        help: "--remote: reconnect after a lost connection (the same settings; the charts go on)",
    },
    Binding {
        steps: &[act(&[Char('r')], Action::ResetCharts)],
        setting: None,
        footer: Footer::IfRoom("reset"),
        help: "reset the charts (the baseline stays)",
    },
    Binding {
        steps: &[
            act(&[Char('z')], Action::ZoomIn),
            act(&[Char('Z')], Action::ZoomOut),
        ],
        setting: None,
        footer: Footer::IfRoom("zoom"),
        help: "zoom the time window in / out (10s .. 10m)",
    },
    Binding {
        steps: &[act(&[Char('t')], Action::ToggleTimeline)],
        setting: None,
        footer: Footer::IfRoom("timeline"),
        help: "timeline: where each work item ran, a lane per CPU and reader; traced only while open; z Z zoom it, space freezes it, ← → choose an item; t closes",
    },
    Binding {
        steps: &[act(&[Char('T')], Action::ToggleTrace)],
        setting: None,
        footer: Footer::None,
        help: "a Perfetto trace from now; T again writes it here (readpath-DATE.pftrace)",
    },
    Binding {
        steps: &[
            act(&[Left], Action::ChooseItem(false)),
            act(&[Right], Action::ChooseItem(true)),
        ],
        setting: None,
        footer: Footer::None,
        help: "with the timeline open: the previous / next work item and its wait (freezes the view)",
    },
    Binding {
        steps: &[act(&[Char('?'), F(1)], Action::ToggleHelp)],
        setting: None,
        footer: Footer::Always("help"),
        help: "this help (Esc or ? closes it; q quits); on the focused panel (Tab, a click) or the cursor's setting, it opens at that",
    },
    Binding {
        steps: &[
            act(&[Char('q')], Action::Quit),
            act(&[Ctrl('c'), Ctrl('d')], Action::QuitNow),
        ],
        setting: None,
        footer: Footer::Always("quit"),
        help: "quit (a summary is printed); with a baseline marked, q asks once (q again); Ctrl-C quits at once",
    },
    Binding {
        steps: &[act(&[Esc], Action::Escape)],
        setting: None,
        footer: Footer::None,
        help: "close a popup (never quits)",
    },
    Binding {
        steps: &[act(&[Ctrl('z')], Action::Suspend)],
        setting: None,
        footer: Footer::None,
        help: "suspend to the shell; fg comes back",
    },
];

/// What `key` does, if it is bound. Alt with a key is that key's step
/// back, where it has one.
pub fn lookup(key: Key) -> Option<&'static Does> {
    let steps = || bindings().iter().flat_map(|b| b.steps);
    if let Alt(c) = key {
        return steps()
            .find(|s| s.keys.contains(&Char(c)))
            .and_then(|s| s.back.as_ref());
    }
    steps().find(|s| s.keys.contains(&key)).map(|s| &s.does)
}

/// What a key event does, if its key is bound.
pub fn does(event: KeyEvent) -> Option<&'static Does> {
    Key::of(event).and_then(lookup)
}

/// The keys that change `setting`, compact, for the settings panel
/// (`<>` for `workload.block_size`).
pub fn setting_keys(setting: &str) -> Option<String> {
    bindings()
        .iter()
        .find(|b| b.setting == Some(setting))
        .map(Binding::compact)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn all_keys() -> impl Iterator<Item = Key> {
        bindings()
            .iter()
            .flat_map(|b| b.steps)
            .flat_map(|s| s.keys.iter().copied())
    }

    #[test]
    fn no_key_is_bound_twice_and_every_step_has_a_key() {
        let mut seen = Vec::new();
        for k in all_keys() {
            assert!(!seen.contains(&k), "{k:?} is bound twice");
            seen.push(k);
        }
        for b in bindings() {
            assert!(!b.steps.is_empty(), "{:?} does nothing", b.help);
            for s in b.steps {
                assert!(!s.keys.is_empty(), "a step of {:?} has no key", b.help);
            }
        }
    }

    #[test]
    fn settings_bindings_name_a_real_setting_once_and_change_only_it() {
        let mut seen = BTreeSet::new();
        // Away from every limit, so each step changes something.
        let mut mid = Settings::default();
        mid.workload.queue_depth = 4;
        mid.workload.readers = 2;
        mid.workload.block_size = 8192;
        mid.load.hogs = Some(1);
        for b in bindings() {
            let changes = b.steps.iter().any(|s| matches!(s.does, Does::Change(_)));
            assert_eq!(changes, b.setting.is_some(), "{:?}", b.help);
            let Some(setting) = b.setting else { continue };
            assert!(
                crate::settings::KEYS.iter().any(|k| k.key == setting),
                "{setting} is not a setting"
            );
            assert!(seen.insert(setting), "{setting} has two bindings");
            for s in b.steps {
                let Does::Change(f) = s.does else {
                    panic!("{setting}: a step that changes nothing")
                };
                let n = f
                    .apply(&mid)
                    .unwrap_or_else(|e| panic!("{:?}: {e}", s.keys[0]));
                let diff = mid.diff(&n);
                assert_eq!(diff.len(), 1, "{:?}: {diff:?}", s.keys[0]);
                assert_eq!(diff[0].key, setting, "{:?}", s.keys[0]);
            }
        }
    }

    #[test]
    fn derived_forms() {
        let keys = |s| setting_keys(s).unwrap();
        assert_eq!(keys("workload.block_size"), "<>");
        assert_eq!(keys("load.hogs"), "gG");
        assert_eq!(keys("workload.queue_depth"), "+-");
        assert_eq!(keys("workload.readers"), "[]");
        assert_eq!(keys("workers.mode"), "w");
        assert_eq!(setting_keys("workload.pattern"), None);
        let help: Vec<String> = bindings().iter().map(Binding::label).collect();
        for want in [
            "+ -", "] [", "> <", "space", "z Z", "?", "q ^C", "Esc", "^Z",
        ] {
            assert!(help.contains(&want.to_string()), "{want:?} in {help:?}");
        }
        let footer: Vec<String> = bindings()
            .iter()
            .filter(|b| b.footer != Footer::None)
            .map(Binding::compact)
            .collect();
        assert!(footer.contains(&"␣".to_string()), "{footer:?}");
        assert!(footer.contains(&"zZ".to_string()), "{footer:?}");
    }

    #[test]
    fn events_map_to_keys() {
        let ev = |code, m| KeyEvent::new(code, m);
        let none = KeyModifiers::NONE;
        let ctrl = KeyModifiers::CONTROL;
        assert!(matches!(
            does(ev(KeyCode::Char('z'), ctrl)),
            Some(Does::Act(Action::Suspend))
        ));
        assert!(matches!(
            does(ev(KeyCode::Char('d'), ctrl)),
            Some(Does::Act(Action::QuitNow))
        ));
        assert!(matches!(
            does(ev(KeyCode::F(1), none)),
            Some(Does::Act(Action::ToggleHelp))
        ));
        assert!(matches!(
            does(ev(KeyCode::Char('='), none)),
            Some(Does::Change(_))
        ));
        assert!(does(ev(KeyCode::Char('X'), none)).is_none());
        assert!(does(ev(KeyCode::Char('w'), ctrl)).is_none());
        assert!(matches!(
            does(ev(KeyCode::Enter, none)),
            Some(Does::Act(Action::OpenChooser))
        ));
        assert!(matches!(
            does(ev(KeyCode::Up, none)),
            Some(Does::Act(Action::CursorUp))
        ));
        assert!(matches!(
            does(ev(KeyCode::Tab, none)),
            Some(Does::Act(Action::FocusNext))
        ));
        assert!(matches!(
            does(ev(KeyCode::BackTab, KeyModifiers::SHIFT)),
            Some(Does::Act(Action::FocusPrev))
        ));
    }

    /// Alt+key is its own key: the step back of a cycle, never the plain
    /// key (Alt-q does not quit, Alt-+ does nothing).
    #[test]
    fn alt_steps_a_cycle_backwards() {
        let alt = KeyModifiers::ALT;
        let ev = |c| KeyEvent::new(KeyCode::Char(c), alt);
        assert_eq!(Key::of(ev('w')), Some(Alt('w')));
        assert_eq!(Key::of(KeyEvent::new(KeyCode::Up, alt)), None);
        assert!(does(ev('q')).is_none(), "Alt-q must not quit");
        assert!(does(ev('+')).is_none(), "a +/- pair needs no Alt");
        assert!(does(ev('b')).is_none());
        let run = |c: char, s: &Settings| -> Settings {
            let Some(Does::Change(f)) = does(ev(c)) else {
                panic!("Alt-{c} changes nothing")
            };
            f.apply(s).unwrap()
        };
        // Alt-W from bound: inline, then same (W goes the other way).
        let s = Settings::default();
        let back = run('W', &s);
        assert_eq!(back.workers.verify_mode.name(), "inline");
        assert_eq!(run('W', &back).workers.verify_mode.name(), "same");
        // Every single-step settings key: Alt undoes the key.
        for b in bindings().iter().filter(|b| b.setting.is_some()) {
            if b.steps.len() != 1 {
                assert!(b.steps.iter().all(|s| s.back.is_none()), "{:?}", b.help);
                continue;
            }
            let step = &b.steps[0];
            let (Char(c), Does::Change(f)) = (step.keys[0], &step.does) else {
                panic!("{:?}", b.help)
            };
            assert!(step.back.is_some(), "{c:?} has no Alt step back");
            let fwd = f.apply(&s).unwrap();
            assert_eq!(run(c, &fwd), s, "Alt-{c} after {c}");
        }
    }

    /// README.md's "### Keys" table: (keys column, does column) per row.
    fn readme_rows() -> Vec<(String, String)> {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/README.md");
        let text = std::fs::read_to_string(path).unwrap();
        let mut lines = text.lines().skip_while(|l| l.trim() != "### Keys").skip(1);
        let rows: Vec<(String, String)> = lines
            .by_ref()
            .skip_while(|l| l.trim().is_empty())
            .take_while(|l| l.trim_start().starts_with('|'))
            .map(|l| {
                let cells: Vec<&str> = l.trim().trim_matches('|').split('|').collect();
                assert_eq!(cells.len(), 2, "README Keys row {l:?}: two columns");
                (cells[0].trim().to_string(), cells[1].trim().to_string())
            })
            .collect();
        assert!(rows.len() > 2, "README.md has no table under ### Keys");
        // Skip the header and the |---| line.
        assert!(rows[1].0.starts_with("--"), "{:?}", rows[1]);
        rows.into_iter().skip(2).collect()
    }

    /// The keys of a README key column, as [`Key::readme`] writes them:
    /// `` `+` / `-` `` -> `+`, `-`; `` `q`, Esc, Ctrl-C `` -> `q`, Esc,
    /// Ctrl-C.
    fn readme_keys(cell: &str) -> Vec<String> {
        let mut keys = Vec::new();
        let mut rest = cell;
        while !rest.is_empty() {
            if let Some(tail) = rest.strip_prefix('`') {
                let end = tail.find('`').expect("closing backtick");
                keys.push(format!("`{}`", &tail[..end]));
                rest = &tail[end + 1..];
            } else {
                let end = rest.find('`').unwrap_or(rest.len());
                keys.extend(
                    rest[..end]
                        .split(|c: char| c.is_whitespace() || c == ',' || c == '/')
                        .filter(|w| !w.is_empty())
                        .map(str::to_string),
                );
                rest = &rest[end..];
            }
        }
        keys
    }

    #[test]
    fn readme_lists_exactly_the_bound_keys() {
        let rows = readme_rows();
        let readme: BTreeSet<String> = rows.iter().flat_map(|(k, _)| readme_keys(k)).collect();
        let shown: BTreeSet<String> = bindings()
            .iter()
            .flat_map(Binding::shown)
            .map(Key::readme)
            .collect();
        let missing: Vec<_> = shown.difference(&readme).collect();
        let extra: Vec<_> = readme.difference(&shown).collect();
        assert!(
            missing.is_empty(),
            "bound but not in README's Keys table: {missing:?}"
        );
        assert!(
            extra.is_empty(),
            "in README's Keys table but not bound (an alias goes in its row's text, \
             as \"(also ...)\"): {extra:?}"
        );
        // A cycle of three values or more says Alt steps back, in the
        // README's row and in the help (a toggle's Alt is the key itself).
        for b in bindings().iter().filter(|b| b.steps.len() == 1) {
            let (Char(c), Does::Change(f), Some(_)) =
                (b.steps[0].keys[0], &b.steps[0].does, &b.steps[0].back)
            else {
                continue;
            };
            let s = Settings::default();
            let twice = f.apply(&s).and_then(|n| f.apply(&n));
            if twice.as_ref().map_or(true, |t| *t == s) {
                continue;
            }
            let alt = format!("Alt-{c}");
            let (_, does) = rows
                .iter()
                .find(|(k, _)| readme_keys(k).contains(&Char(c).readme()))
                .unwrap();
            assert!(
                does.contains(&alt),
                "README's row for {c:?} does not say {alt}"
            );
            assert!(
                b.help.contains(&alt),
                "the help of {c:?} does not say {alt}"
            );
        }
        // Aliases: named in the row of the keys they stand for.
        for b in bindings() {
            let first = b.shown().next().unwrap().readme();
            let (_, does) = rows
                .iter()
                .find(|(k, _)| readme_keys(k).contains(&first))
                .unwrap();
            for a in b.aliases() {
                let a = a.readme();
                assert!(
                    does.contains("(also ") && does.contains(&a),
                    "README's row for {first} does not name its alias {a} as \"(also ...)\""
                );
            }
        }
    }
}
