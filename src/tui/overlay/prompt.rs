//! The `:` prompt: `:set workers.verify_mode=bound` sets a value by name,
//! parsed as `--set` parses it (the error names the key, the value and what
//! is allowed) and refused for the reasons the engine would refuse it
//! ([`policy::refusal`]); Tab completes keys and then values (the
//! chooser's lists), Up and Down recall the commands entered before. The
//! parser and the completion are pure (text and settings in) and
//! unit-tested.

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::chooser::values;
use super::{OverlayAction, ctrl_c};
use crate::settings::{self, Settings};
use crate::tui::app::App;
use crate::tui::policy;
use crate::tui::state::{Overlay, Running};

/// The longest command the prompt takes.
const PROMPT_MAX: usize = 200;

/// The prompt's usage, which each of its errors ends with.
const USAGE: &str =
    "type set section.key=value (e.g. set workers.verify_mode=bound); Tab completes a key";

/// Why a prompt command does not run.
#[derive(Debug, thiserror::Error)]
pub enum PromptError {
    /// Nothing after `set`.
    #[error("{USAGE}")]
    Empty,
    /// No `key=value`.
    #[error("{0:?}: expected section.key=value; {USAGE}")]
    NotAssignment(String),
    /// The settings refused the value (the key, the value, what is allowed).
    #[error(transparent)]
    Setting(#[from] crate::settings::SettingsError),
    /// The value parses, but cannot run here (the resolver's reason).
    #[error("{0}")]
    Refused(String),
}

/// `:set k=v`, `set k=v` or `k=v` to (key, value); the error says what
/// the prompt takes.
pub fn parse_command(text: &str) -> Result<(&str, &str), PromptError> {
    let t = text.trim();
    let t = t.strip_prefix(':').unwrap_or(t).trim_start();
    let t = match t.strip_prefix("set") {
        Some(rest) if rest.is_empty() || rest.starts_with(' ') => rest.trim_start(),
        _ => t,
    };
    if t.is_empty() {
        return Err(PromptError::Empty);
    }
    match t.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim(), v.trim())),
        _ => Err(PromptError::NotAssignment(t.to_string())),
    }
}

/// The settings a prompt command leads to, parsed as `--set` parses
/// (the error names the key, the value and what is allowed), then checked
/// as the engine checks: or why not.
pub fn command_settings(run: &Running, text: &str) -> Result<Settings, PromptError> {
    let (key, value) = parse_command(text)?;
    let mut n = run.settings().clone();
    n.set(key, value)?;
    if let Some(why) = policy::refusal(run, &n, key.trim()) {
        return Err(PromptError::Refused(why));
    }
    Ok(n)
}

fn common_prefix(items: &[String]) -> String {
    let Some(first) = items.first() else {
        return String::new();
    };
    let mut n = first.len();
    for s in &items[1..] {
        n = n.min(
            first
                .bytes()
                .zip(s.bytes())
                .take_while(|(a, b)| a == b)
                .count(),
        );
    }
    while !first.is_char_boundary(n) {
        n -= 1;
    }
    first[..n].to_string()
}

/// Tab in the prompt: completes the key (from its start, or from its name
/// after the section: `verify` is `workers.verify_mode`), then `=`; after
/// `=`, the value from the chooser's list. Returns the new text and the
/// candidates when there is more than one.
pub fn complete(text: &str, s: &Settings) -> (String, Vec<String>) {
    let lead_len = text.len() - text.trim_start().len();
    let t = &text[lead_len..];
    let (prefix, rest) = match t.strip_prefix("set ") {
        Some(r) => (format!("{}set ", &text[..lead_len]), r.trim_start()),
        None => (text[..lead_len].to_string(), t),
    };
    if let Some((k, v)) = rest.split_once('=') {
        let k = k.trim();
        let cands: Vec<String> = values(k, s)
            .into_iter()
            .filter(|c| c.starts_with(v.trim()))
            .collect();
        return match cands.len() {
            0 => (text.to_string(), Vec::new()),
            1 => (format!("{prefix}{k}={}", cands[0]), Vec::new()),
            _ => (format!("{prefix}{k}={}", common_prefix(&cands)), cands),
        };
    }
    let typed = rest.trim();
    let mut cands: Vec<String> = settings::KEYS
        .iter()
        .map(|k| k.key.name())
        .filter(|k| k.starts_with(typed))
        .map(str::to_string)
        .collect();
    if cands.is_empty() {
        cands = settings::KEYS
            .iter()
            .map(|k| k.key.name())
            .filter(|k| k.split_once('.').is_some_and(|(_, n)| n.starts_with(typed)))
            .map(str::to_string)
            .collect();
    }
    match cands.len() {
        0 => (text.to_string(), Vec::new()),
        1 => (format!("{prefix}{}=", cands[0]), Vec::new()),
        _ => {
            let lcp = common_prefix(&cands);
            let new = if lcp.len() > typed.len() {
                lcp
            } else {
                typed.to_string()
            };
            (format!("{prefix}{new}"), cands)
        }
    }
}

/// The `:` prompt, empty.
pub fn open_prompt() -> Overlay {
    Overlay::Prompt {
        text: String::new(),
        error: None,
        hint: None,
        recall: None,
    }
}

/// A key while the `:` prompt is open: typing, Backspace, Tab completes,
/// Up/Down walk the commands entered before, Enter applies (a bad command
/// stays, with the parser's error), Esc closes, Ctrl-C quits.
pub fn prompt_key(app: &mut App, key: KeyEvent) -> OverlayAction {
    if ctrl_c(&key) {
        app.overlays.close();
        return OverlayAction::Quit;
    }
    let run = &app.running;
    let (open, history) = app.overlays.prompt_parts();
    let Overlay::Prompt {
        text,
        error,
        hint,
        recall,
    } = open
    else {
        return OverlayAction::None;
    };
    let plain = !key
        .modifiers
        .intersects(KeyModifiers::CONTROL | KeyModifiers::ALT);
    match key.code {
        KeyCode::Esc => {
            *open = Overlay::None;
            return OverlayAction::None;
        }
        KeyCode::Enter => {
            if text.trim().is_empty() {
                *open = Overlay::None;
                return OverlayAction::None;
            }
            let cmd = text.clone();
            return match command_settings(run, &cmd) {
                Ok(s) => {
                    history.remember(cmd);
                    *open = Overlay::None;
                    OverlayAction::Apply(Box::new(s))
                }
                Err(e) => {
                    history.remember(cmd);
                    *error = Some(e.to_string());
                    *recall = None;
                    OverlayAction::None
                }
            };
        }
        KeyCode::Tab => {
            let (new, cands) = complete(text, run.settings());
            *text = new;
            *hint = (!cands.is_empty()).then(|| cands.join("  "));
            *error = None;
        }
        KeyCode::Up => {
            let history = history.commands();
            let i = recall.map_or(history.len(), |i| i).checked_sub(1);
            if let Some(i) = i
                && let Some(h) = history.get(i)
            {
                *text = h.clone();
                *recall = Some(i);
                *error = None;
            }
        }
        KeyCode::Down => {
            if let Some(i) = *recall {
                match history.commands().get(i + 1) {
                    Some(h) => {
                        *text = h.clone();
                        *recall = Some(i + 1);
                    }
                    None => {
                        text.clear();
                        *recall = None;
                    }
                }
            }
        }
        KeyCode::Backspace => {
            text.pop();
            *error = None;
            *hint = None;
        }
        KeyCode::Char(c) if plain && !c.is_control() => {
            if text.chars().count() < PROMPT_MAX {
                text.push(c);
            }
            *error = None;
            *hint = None;
        }
        _ => {}
    }
    OverlayAction::None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::VerifyMode;

    fn k(c: KeyCode) -> KeyEvent {
        KeyEvent::new(c, KeyModifiers::NONE)
    }

    #[test]
    fn the_prompt_parses_set_and_refuses_with_the_parsers_words() {
        assert_eq!(
            parse_command("set workers.verify_mode=bound").unwrap(),
            ("workers.verify_mode", "bound")
        );
        assert_eq!(
            parse_command(":set  load.hogs = 2 ").unwrap(),
            ("load.hogs", "2")
        );
        assert_eq!(
            parse_command("workload.block_size=64K").unwrap(),
            ("workload.block_size", "64K")
        );
        assert!(parse_command("").is_err());
        assert!(parse_command("set").is_err());
        assert!(
            parse_command("workers.mode")
                .unwrap_err()
                .to_string()
                .contains("key=value")
        );
        // "settle=1" is a key named settle, not set + tle.
        assert_eq!(parse_command("settle=1").unwrap().0, "settle");
        let a = crate::tui::fixture::app(false);
        let s = command_settings(&a.running, "set workers.verify_mode=unbound").unwrap();
        let d = a.running.settings().diff(&s);
        assert_eq!(d.len(), 1);
        assert_eq!(
            (d[0].key.as_str(), d[0].to.as_str()),
            ("workers.verify_mode", "unbound")
        );
        let e = command_settings(&a.running, "set workers.verify_mode=boundd")
            .unwrap_err()
            .to_string();
        for want in [
            "workers.verify_mode",
            "boundd",
            "same, inline, bound, unbound",
        ] {
            assert!(e.contains(want), "{want:?} in {e}");
        }
        let e = command_settings(&a.running, "workers.verfy_mode=bound")
            .unwrap_err()
            .to_string();
        assert!(e.contains("workers.verify_mode"), "a suggestion: {e}");
        let e = command_settings(&a.running, "workload.queue_depth=5000")
            .unwrap_err()
            .to_string();
        assert!(e.contains("5000") && e.contains("1..=1024"), "{e}");
    }

    #[test]
    fn tab_completes_keys_and_values() {
        let s = Settings::default();
        assert_eq!(complete("set verify", &s).0, "set workers.verify_mode=");
        assert_eq!(
            complete("workers.verify_mode=un", &s).0,
            "workers.verify_mode=unbound"
        );
        let (t, c) = complete("workers.m", &s);
        assert_eq!(
            t, "workers.m",
            "mode and max_active: no common longer prefix"
        );
        assert_eq!(c, ["workers.mode", "workers.max_active"]);
        let (t, c) = complete("set workload.b", &s);
        assert_eq!(t, "set workload.b");
        assert_eq!(c.len(), 2, "{c:?}");
        assert_eq!(complete("nothing", &s), ("nothing".to_string(), Vec::new()));
    }

    #[test]
    fn the_prompt_applies_once_keeps_errors_and_recalls() {
        let mut a = crate::tui::fixture::app(false);
        a.overlays.open(open_prompt());
        for c in "set workers.verify_mode=nope".chars() {
            prompt_key(&mut a, k(KeyCode::Char(c)));
        }
        assert_eq!(prompt_key(&mut a, k(KeyCode::Enter)), OverlayAction::None);
        assert!(
            matches!(a.overlays.current(), Overlay::Prompt { error: Some(e), .. } if e.contains("nope")),
            "{:?}",
            a.overlays.current()
        );
        for _ in 0.."nope".len() {
            prompt_key(&mut a, k(KeyCode::Backspace));
        }
        for c in "bound".chars() {
            prompt_key(&mut a, k(KeyCode::Char(c)));
        }
        // Default is bound already: pick unbound.
        for _ in 0.."bound".len() {
            prompt_key(&mut a, k(KeyCode::Backspace));
        }
        for c in "unbound".chars() {
            prompt_key(&mut a, k(KeyCode::Char(c)));
        }
        let OverlayAction::Apply(s) = prompt_key(&mut a, k(KeyCode::Enter)) else {
            panic!("{:?}", a.overlays.current())
        };
        assert_eq!(s.workers.verify_mode, VerifyMode::Unbound);
        assert_eq!(*a.overlays.current(), Overlay::None);
        // Up recalls the last command, then the one before.
        a.overlays.open(open_prompt());
        prompt_key(&mut a, k(KeyCode::Up));
        assert!(
            matches!(a.overlays.current(), Overlay::Prompt { text, .. } if text == "set workers.verify_mode=unbound")
        );
        prompt_key(&mut a, k(KeyCode::Up));
        assert!(
            matches!(a.overlays.current(), Overlay::Prompt { text, .. } if text.ends_with("=nope"))
        );
        prompt_key(&mut a, k(KeyCode::Down));
        prompt_key(&mut a, k(KeyCode::Down));
        assert!(matches!(a.overlays.current(), Overlay::Prompt { text, .. } if text.is_empty()));
        assert_eq!(prompt_key(&mut a, k(KeyCode::Esc)), OverlayAction::None);
        assert_eq!(*a.overlays.current(), Overlay::None);
    }

    /// A key for another overlay (the chooser open) does nothing here.
    #[test]
    fn keys_for_another_overlay_are_ignored() {
        let mut a = crate::tui::fixture::app(false);
        a.overlays.open(super::super::chooser::open_chooser(
            &a,
            "workers.verify_mode",
        ));
        let before = a.overlays.current().clone();
        assert_eq!(prompt_key(&mut a, k(KeyCode::Down)), OverlayAction::None);
        assert_eq!(*a.overlays.current(), before);
    }
}
