//! What the overlays do with a key: the preset picker, the save-name box
//! and its overwrite question, the help's scrolling and search, the error
//! box ([`overlay_key`], pure over the overlay alone), and the two that read
//! the settings, the value chooser ([`chooser`]) and the `:` prompt
//! ([`prompt`]); [`popup_key`] sends a key to the one open. Which overlay
//! is open is part of the explorer's state ([`crate::tui::state::Overlays`],
//! a part of [`App`]); drawing them is `render/popups.rs`'s and
//! `render/help.rs`'s. What the overlays do is kept here, above the state:
//! the state never imports this module, so the two make no circle.

pub mod chooser;
pub mod prompt;

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::app::App;
use super::state::{Overlay, PickItem};
use crate::settings::Settings;

/// What a key in an overlay asks for, beyond changing the overlay.
#[derive(Debug, Clone, PartialEq)]
pub enum OverlayAction {
    /// Nothing more.
    None,
    /// Apply a preset: its name, description and settings.
    ApplyPreset(String, String, Box<Settings>),
    /// Save the current settings under this name (`true`: replace the file).
    Save(String, bool),
    /// Run the workload with these settings (the chooser, the prompt): one
    /// change, as a key's.
    Apply(Box<Settings>),
    /// Quit.
    Quit,
}

/// Ctrl-C: quits from any overlay.
fn ctrl_c(key: &KeyEvent) -> bool {
    key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c')
}

/// Handles a key while an overlay is open: moves in the picker, edits the
/// name, answers the overwrite question. Pure: the caller applies or saves.
/// `exists` tells whether a user preset of that name is already saved.
pub fn overlay_key(
    overlay: &mut Overlay,
    key: KeyEvent,
    exists: &dyn Fn(&str) -> bool,
) -> OverlayAction {
    if ctrl_c(&key) {
        *overlay = Overlay::None;
        return OverlayAction::Quit;
    }
    match overlay {
        Overlay::Picker { .. } => picker_key(overlay, key),
        Overlay::SaveName { .. } => save_name_key(overlay, key, exists),
        Overlay::ConfirmOverwrite(name) => {
            let name = name.clone();
            *overlay = Overlay::None;
            if matches!(key.code, KeyCode::Char('y') | KeyCode::Char('Y')) {
                OverlayAction::Save(name, true)
            } else {
                OverlayAction::None
            }
        }
        Overlay::Help { .. } => help_key(overlay, key),
        Overlay::Error(_) | Overlay::None => {
            *overlay = Overlay::None;
            OverlayAction::None
        }
        // They need the settings: see [`popup_key`].
        Overlay::Chooser { .. } | Overlay::Prompt { .. } => OverlayAction::None,
    }
}

/// A key in the preset picker: move, apply the selected preset, or close.
fn picker_key(overlay: &mut Overlay, key: KeyEvent) -> OverlayAction {
    let Overlay::Picker { items, selected } = overlay else {
        return OverlayAction::None;
    };
    match key.code {
        KeyCode::Up | KeyCode::Char('k') => {
            *selected = selected.saturating_sub(1);
            OverlayAction::None
        }
        KeyCode::Down | KeyCode::Char('j') => {
            *selected = (*selected + 1).min(items.len().saturating_sub(1));
            OverlayAction::None
        }
        KeyCode::Enter => {
            let item = items.get(*selected).cloned();
            match item {
                Some(PickItem {
                    name,
                    description,
                    settings: Some(s),
                    ..
                }) => {
                    *overlay = Overlay::None;
                    OverlayAction::ApplyPreset(name, description, Box::new(s))
                }
                Some(PickItem { description, .. }) => {
                    *overlay = Overlay::Error(description);
                    OverlayAction::None
                }
                None => OverlayAction::None,
            }
        }
        // Esc (or q, or p again) closes; any other key does nothing, so a
        // stray key does not lose the list.
        KeyCode::Esc | KeyCode::Char('q') | KeyCode::Char('p') => {
            *overlay = Overlay::None;
            OverlayAction::None
        }
        _ => OverlayAction::None,
    }
}

/// A key in the save dialog: edit the name, refuse a bad character, or save.
fn save_name_key(
    overlay: &mut Overlay,
    key: KeyEvent,
    exists: &dyn Fn(&str) -> bool,
) -> OverlayAction {
    let Overlay::SaveName {
        name,
        selected,
        refused,
    } = overlay
    else {
        return OverlayAction::None;
    };
    let plain = !key
        .modifiers
        .intersects(KeyModifiers::CONTROL | KeyModifiers::ALT);
    *refused = None;
    match key.code {
        KeyCode::Enter if !name.is_empty() => {
            let name = name.clone();
            if let Err(e) = crate::scenario::preset::check_name(&name) {
                *overlay = Overlay::Error(e.to_string());
                OverlayAction::None
            } else if exists(&name) {
                *overlay = Overlay::ConfirmOverwrite(name);
                OverlayAction::None
            } else {
                *overlay = Overlay::None;
                OverlayAction::Save(name, false)
            }
        }
        KeyCode::Backspace => {
            if std::mem::take(selected) {
                name.clear();
            } else {
                name.pop();
            }
            OverlayAction::None
        }
        KeyCode::Right | KeyCode::End => {
            *selected = false;
            OverlayAction::None
        }
        KeyCode::Char(c)
            if plain && (c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')) =>
        {
            if std::mem::take(selected) {
                name.clear();
            }
            if name.len() < 64 {
                name.push(c);
            } else {
                *refused = Some("a preset name has at most 64 characters".into());
            }
            OverlayAction::None
        }
        KeyCode::Char(c) if plain => {
            *refused = Some(format!(
                "{:?} cannot be in a preset name: letters, digits, - _ . only",
                c
            ));
            OverlayAction::None
        }
        KeyCode::Esc => {
            *overlay = Overlay::None;
            OverlayAction::None
        }
        _ => OverlayAction::None,
    }
}

/// A key in the help: type a search, scroll, or close.
fn help_key(overlay: &mut Overlay, key: KeyEvent) -> OverlayAction {
    let Overlay::Help {
        scroll,
        find,
        typing,
    } = overlay
    else {
        return OverlayAction::None;
    };
    if *typing {
        match key.code {
            KeyCode::Enter => *typing = false,
            KeyCode::Esc => {
                find.clear();
                *typing = false;
            }
            KeyCode::Backspace => {
                find.pop();
            }
            KeyCode::Char(c)
                if find.len() < 40
                    && !key
                        .modifiers
                        .intersects(KeyModifiers::CONTROL | KeyModifiers::ALT) =>
            {
                find.push(c);
                *scroll = 0;
            }
            _ => {}
        }
        return OverlayAction::None;
    }
    // At most the whole help at 80 columns: Up always comes back.
    let most = crate::tui::help::line_count(crate::tui::keys::Mode::default(), find, 76);
    match key.code {
        KeyCode::Up | KeyCode::Char('k') => *scroll = scroll.saturating_sub(1),
        KeyCode::Down | KeyCode::Char('j') => *scroll = (*scroll + 1).min(most),
        KeyCode::PageUp => *scroll = scroll.saturating_sub(10),
        KeyCode::PageDown | KeyCode::Char(' ') => *scroll = (*scroll + 10).min(most),
        KeyCode::Home => *scroll = 0,
        KeyCode::End => *scroll = most,
        KeyCode::Char('/') => {
            *typing = true;
            find.clear();
            *scroll = 0;
        }
        KeyCode::Esc if !find.is_empty() => {
            find.clear();
            *scroll = 0;
        }
        // q still quits from the help; Esc and ? close it; any other key
        // does nothing (a stray key does not lose the place).
        KeyCode::Char('q') => {
            *overlay = Overlay::None;
            return OverlayAction::Quit;
        }
        KeyCode::Esc | KeyCode::Char('?') => *overlay = Overlay::None,
        _ => {}
    }
    OverlayAction::None
}

/// Handles a key while any overlay is open: the chooser and the prompt
/// (which read the settings) here, the others in [`overlay_key`].
pub fn popup_key(app: &mut App, key: KeyEvent, exists: &dyn Fn(&str) -> bool) -> OverlayAction {
    match app.overlays.current() {
        Overlay::Chooser { .. } => chooser::chooser_key(app, key),
        Overlay::Prompt { .. } => prompt::prompt_key(app, key),
        _ => overlay_key(app.overlays.current_mut(), key, exists),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tui::keys::Action;
    use crate::tui::policy::action_for_key;

    fn key(c: char) -> KeyEvent {
        KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE)
    }

    #[test]
    fn picker_moves_and_applies_the_chosen_preset() {
        let item = |name: &str, ok: bool| PickItem {
            name: name.into(),
            origin: "shipped",
            description: format!("about {name}"),
            settings: ok.then(Settings::default),
        };
        let mut o = Overlay::Picker {
            items: vec![item("a", true), item("b", true), item("broken", false)],
            selected: 0,
        };
        let k = |c: KeyCode| KeyEvent::new(c, KeyModifiers::NONE);
        let never = |_: &str| false;
        assert_eq!(
            overlay_key(&mut o, k(KeyCode::Down), &never),
            OverlayAction::None
        );
        assert_eq!(
            overlay_key(&mut o, k(KeyCode::Up), &never),
            OverlayAction::None
        );
        overlay_key(&mut o, k(KeyCode::Down), &never);
        assert_eq!(
            overlay_key(&mut o, k(KeyCode::Enter), &never),
            OverlayAction::ApplyPreset("b".into(), "about b".into(), Box::default())
        );
        assert_eq!(o, Overlay::None);
        // An invalid preset shows its error instead of applying.
        let mut o = Overlay::Picker {
            items: vec![item("broken", false)],
            selected: 0,
        };
        assert_eq!(
            overlay_key(&mut o, k(KeyCode::Enter), &never),
            OverlayAction::None
        );
        assert!(matches!(o, Overlay::Error(_)));
    }

    #[test]
    fn saving_asks_for_a_name_and_before_replacing() {
        let k = |c: KeyCode| KeyEvent::new(c, KeyModifiers::NONE);
        let exists = |n: &str| n == "taken";
        let typed = |name: &str| Overlay::SaveName {
            name: name.into(),
            selected: false,
            refused: None,
        };
        let mut o = typed("");
        for c in "myrun1".chars() {
            overlay_key(&mut o, k(KeyCode::Char(c)), &exists);
        }
        assert_eq!(o, typed("myrun1"));
        // A character a name cannot have is refused with a message.
        overlay_key(&mut o, k(KeyCode::Char(' ')), &exists);
        assert!(
            matches!(&o, Overlay::SaveName { name, refused: Some(r), .. } if name == "myrun1" && r.contains("' '")),
            "{o:?}"
        );
        overlay_key(&mut o, k(KeyCode::Backspace), &exists);
        assert_eq!(
            overlay_key(&mut o, k(KeyCode::Enter), &exists),
            OverlayAction::Save("myrun".into(), false)
        );
        // The prefilled name is selected: typing replaces it; Right keeps
        // it for appending; Backspace clears it.
        let prefilled = || Overlay::SaveName {
            name: "default".into(),
            selected: true,
            refused: None,
        };
        let mut o = prefilled();
        overlay_key(&mut o, k(KeyCode::Char('x')), &exists);
        assert_eq!(o, typed("x"));
        let mut o = prefilled();
        overlay_key(&mut o, k(KeyCode::Right), &exists);
        overlay_key(&mut o, k(KeyCode::Char('2')), &exists);
        assert_eq!(o, typed("default2"));
        let mut o = prefilled();
        overlay_key(&mut o, k(KeyCode::Backspace), &exists);
        assert_eq!(o, typed(""));
        // An existing name asks; only y replaces.
        let mut o = typed("taken");
        assert_eq!(
            overlay_key(&mut o, k(KeyCode::Enter), &exists),
            OverlayAction::None
        );
        assert_eq!(o, Overlay::ConfirmOverwrite("taken".into()));
        assert_eq!(
            overlay_key(&mut o, k(KeyCode::Char('n')), &exists),
            OverlayAction::None
        );
        assert_eq!(o, Overlay::None);
        let mut o = Overlay::ConfirmOverwrite("taken".into());
        assert_eq!(
            overlay_key(&mut o, k(KeyCode::Char('y')), &exists),
            OverlayAction::Save("taken".into(), true)
        );
        // Esc cancels without saving; Enter on an empty name does nothing.
        let mut o = typed("x");
        assert_eq!(
            overlay_key(&mut o, k(KeyCode::Esc), &exists),
            OverlayAction::None
        );
        assert_eq!(o, Overlay::None);
        let mut o = typed("");
        assert_eq!(
            overlay_key(&mut o, k(KeyCode::Enter), &exists),
            OverlayAction::None
        );
        assert_eq!(o, typed(""));
        assert_eq!(
            action_for_key(key('p'), &Settings::default(), 2),
            Action::OpenPicker
        );
        assert_eq!(
            action_for_key(key('s'), &Settings::default(), 2),
            Action::StartSave
        );
    }
}
