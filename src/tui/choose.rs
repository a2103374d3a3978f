//! Setting a value directly instead of stepping to it: the value chooser
//! (Enter on a settings row, or a click on it) and the `:` prompt
//! (`:set workers.verify_mode=bound`). Going from `unbound` to `bound` with
//! `W` passes through every value between, each one applied to the running
//! workload and marked on the charts; here the value is picked and applied
//! as one change, through the same [`super::app::OverlayAction::Apply`] a
//! key's change takes. Everything here is pure (settings in, settings or a
//! reason out) so the lists, the parser and the completion are unit-tested;
//! a value is refused for the reasons the engine would refuse it
//! ([`Settings::validate`], [`crate::engine::resolve`]), found by
//! [`App::refusal`].

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::app::{App, Overlay, OverlayAction};
use crate::settings::{self, Settings};

/// One value in the chooser.
#[derive(Debug, Clone, PartialEq)]
pub struct Choice {
    /// The value as [`Settings::get`] writes it (and [`Settings::set`] reads).
    pub value: String,
    /// It is the value set now.
    pub current: bool,
    /// Why it cannot be used right now (greyed), if it cannot.
    pub why: Option<String>,
}

/// The longest command the prompt takes.
const PROMPT_MAX: usize = 200;
/// Commands the prompt remembers for Up.
const HISTORY: usize = 50;

/// The values the chooser offers for `key` before the current one is added:
/// its [`settings::Setting::ladder`] (every variant of an enum in the order
/// its key cycles, both booleans, and for a number the table's ladder or a
/// doubling over its range). Empty for a free-form value (a path, a salt):
/// the chooser then offers the current value and says to type another with `:`.
pub fn ladder(key: &str) -> Vec<String> {
    settings::key_info(key).map_or_else(Vec::new, settings::Setting::ladder)
}

/// Where a value sorts in a numeric ladder: words (`auto`, `default`,
/// `[]`) first, then numbers and sizes by magnitude; `None` for a value of
/// neither kind.
fn magnitude(v: &str) -> Option<f64> {
    match v {
        "auto" | "default" | "[]" => Some(f64::NEG_INFINITY),
        _ => v
            .parse::<f64>()
            .ok()
            .or_else(|| settings::units::parse_size(v).ok().map(|b| b as f64)),
    }
}

/// The values of `key` as the chooser lists them: [`ladder`]'s, each in
/// [`Settings::get`]'s form, plus the current value, numbers in order.
pub fn values(key: &str, s: &Settings) -> Vec<String> {
    let current = s.get(key).unwrap_or_default();
    let mut out: Vec<String> = Vec::new();
    for raw in ladder(key) {
        let mut n = s.clone();
        if n.set(key, &raw).is_ok()
            && let Some(v) = n.get(key)
            && !out.contains(&v)
        {
            out.push(v);
        }
    }
    if !out.contains(&current) {
        out.push(current);
    }
    // Numbers (and sizes) in order; enums keep the order their key cycles.
    let keys: Option<Vec<f64>> = out.iter().map(|v| magnitude(v)).collect();
    if out.len() > 1 && keys.is_some() && !is_enum(key) {
        out.sort_by(|a, b| {
            magnitude(a)
                .unwrap_or(0.0)
                .total_cmp(&magnitude(b).unwrap_or(0.0))
        });
    }
    out
}

/// A key whose values keep the order its key cycles (not sorted by size).
fn is_enum(key: &str) -> bool {
    settings::key_info(key).is_some_and(|k| !k.cycle().is_empty())
}

/// The chooser's items for `key`: [`values`], the current one marked, each
/// one the engine would refuse (or run as something else) with why.
pub fn choices(app: &App, key: &str) -> Vec<Choice> {
    let current = app.settings.get(key).unwrap_or_default();
    values(key, &app.settings)
        .into_iter()
        .map(|value| {
            let why = if value == current {
                None
            } else {
                let mut n = app.settings.clone();
                match n.set(key, &value) {
                    Ok(()) => app.refusal(&n, key),
                    Err(e) => Some(e.to_string()),
                }
            };
            Choice {
                current: value == current,
                value,
                why,
            }
        })
        .collect()
}

/// The chooser of `key`, the cursor on its current value.
pub fn open_chooser(app: &App, key: &'static str) -> Overlay {
    let items = choices(app, key);
    let selected = items.iter().position(|c| c.current).unwrap_or(0);
    Overlay::Chooser {
        key,
        items,
        selected,
        note: None,
    }
}

/// `:set k=v`, `set k=v` or `k=v` to (key, value); the error says what
/// the prompt takes.
pub fn parse_command(text: &str) -> Result<(&str, &str), String> {
    let t = text.trim();
    let t = t.strip_prefix(':').unwrap_or(t).trim_start();
    let t = match t.strip_prefix("set") {
        Some(rest) if rest.is_empty() || rest.starts_with(' ') => rest.trim_start(),
        _ => t,
    };
    let usage =
        "type set section.key=value (e.g. set workers.verify_mode=bound); Tab completes a key";
    if t.is_empty() {
        return Err(usage.into());
    }
    match t.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim(), v.trim())),
        _ => Err(format!("{t:?}: expected section.key=value; {usage}")),
    }
}

/// The settings a prompt command leads to, parsed as `--set` parses
/// (the error names the key, the value and what is allowed), then checked
/// as the engine checks: or why not.
pub fn command_settings(app: &App, text: &str) -> Result<Settings, String> {
    let (key, value) = parse_command(text)?;
    let mut n = app.settings.clone();
    n.set(key, value).map_err(|e| e.to_string())?;
    if let Some(why) = app.refusal(&n, key.trim()) {
        return Err(why);
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
        .map(|k| k.key)
        .filter(|k| k.starts_with(typed))
        .map(str::to_string)
        .collect();
    if cands.is_empty() {
        cands = settings::KEYS
            .iter()
            .map(|k| k.key)
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

fn ctrl_c(key: &KeyEvent) -> bool {
    key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c')
}

/// A key while the chooser is open: Up/Down (or k/j) move, Home/End,
/// Enter applies the highlighted value (a greyed one says why instead),
/// Esc or q closes, Ctrl-C quits.
pub fn chooser_key(app: &mut App, key: KeyEvent) -> OverlayAction {
    if ctrl_c(&key) {
        app.overlay = Overlay::None;
        return OverlayAction::Quit;
    }
    let Overlay::Chooser {
        key: setting,
        items,
        selected,
        note,
    } = &mut app.overlay
    else {
        return OverlayAction::None;
    };
    *note = None;
    let last = items.len().saturating_sub(1);
    match key.code {
        KeyCode::Up | KeyCode::Char('k') => *selected = selected.saturating_sub(1),
        KeyCode::Down | KeyCode::Char('j') => *selected = (*selected + 1).min(last),
        KeyCode::Home | KeyCode::PageUp => *selected = 0,
        KeyCode::End | KeyCode::PageDown => *selected = last,
        KeyCode::Enter => return pick(app),
        KeyCode::Esc | KeyCode::Char('q') => app.overlay = Overlay::None,
        _ => {
            *note = Some(format!(
                "↑↓ choose a value of {setting}, Enter applies it, Esc closes"
            ));
        }
    }
    OverlayAction::None
}

/// Applies the chooser's highlighted value: one change of its setting,
/// or (greyed) the reason, and the chooser stays.
pub fn pick(app: &mut App) -> OverlayAction {
    let Overlay::Chooser {
        key,
        items,
        selected,
        note,
    } = &mut app.overlay
    else {
        return OverlayAction::None;
    };
    let Some(item) = items.get(*selected) else {
        return OverlayAction::None;
    };
    if let Some(why) = &item.why {
        *note = Some(format!(
            "{} = {} cannot be used here: {why}",
            key, item.value
        ));
        return OverlayAction::None;
    }
    let mut n = app.settings.clone();
    match n.set(key, &item.value) {
        Ok(()) => {
            app.overlay = Overlay::None;
            OverlayAction::Apply(Box::new(n))
        }
        Err(e) => {
            *note = Some(e.to_string());
            OverlayAction::None
        }
    }
}

/// A key while the `:` prompt is open: typing, Backspace, Tab completes,
/// Up/Down walk the commands entered before, Enter applies (a bad command
/// stays, with the parser's error), Esc closes, Ctrl-C quits.
pub fn prompt_key(app: &mut App, key: KeyEvent) -> OverlayAction {
    if ctrl_c(&key) {
        app.overlay = Overlay::None;
        return OverlayAction::Quit;
    }
    let history = &app.prompt_history;
    let Overlay::Prompt {
        text,
        error,
        hint,
        recall,
    } = &mut app.overlay
    else {
        return OverlayAction::None;
    };
    let plain = !key
        .modifiers
        .intersects(KeyModifiers::CONTROL | KeyModifiers::ALT);
    match key.code {
        KeyCode::Esc => {
            app.overlay = Overlay::None;
            return OverlayAction::None;
        }
        KeyCode::Enter => {
            if text.trim().is_empty() {
                app.overlay = Overlay::None;
                return OverlayAction::None;
            }
            let cmd = text.clone();
            return match command_settings(app, &cmd) {
                Ok(s) => {
                    remember(&mut app.prompt_history, cmd);
                    app.overlay = Overlay::None;
                    OverlayAction::Apply(Box::new(s))
                }
                Err(e) => {
                    remember(&mut app.prompt_history, cmd);
                    if let Overlay::Prompt { error, recall, .. } = &mut app.overlay {
                        *error = Some(e);
                        *recall = None;
                    }
                    OverlayAction::None
                }
            };
        }
        KeyCode::Tab => {
            let (new, cands) = complete(text, &app.settings);
            *text = new;
            *hint = (!cands.is_empty()).then(|| cands.join("  "));
            *error = None;
        }
        KeyCode::Up => {
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
                match history.get(i + 1) {
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

fn remember(history: &mut Vec<String>, cmd: String) {
    history.retain(|h| *h != cmd);
    history.push(cmd);
    if history.len() > HISTORY {
        history.remove(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::{EngineKind, VerifyMode};

    fn k(c: KeyCode) -> KeyEvent {
        KeyEvent::new(c, KeyModifiers::NONE)
    }

    #[test]
    fn an_enum_offers_every_variant_the_current_one_marked() {
        let a = crate::tui::fixture::app(false);
        let c = choices(&a, "workers.verify_mode");
        let v: Vec<&str> = c.iter().map(|c| c.value.as_str()).collect();
        assert_eq!(v, ["same", "inline", "bound", "unbound"]);
        let cur: Vec<bool> = c.iter().map(|c| c.current).collect();
        assert_eq!(
            cur,
            [false, false, true, false],
            "default verify_mode is bound"
        );
        assert!(c.iter().all(|c| c.why.is_none()), "{c:?}");
    }

    #[test]
    fn a_number_offers_its_ladder_and_the_current_value_in_order() {
        let mut a = crate::tui::fixture::app(false);
        let v = values("workload.block_size", &a.settings);
        assert_eq!(v.first().unwrap(), "4K");
        assert_eq!(v.last().unwrap(), "1M");
        assert_eq!(v.len(), 9, "{v:?}");
        a.settings.workload.readers = 10;
        let v = values("workload.readers", &a.settings);
        let i = v
            .iter()
            .position(|x| x == "10")
            .expect("current value listed");
        assert_eq!((v[i - 1].as_str(), v[i + 1].as_str()), ("8", "16"), "{v:?}");
        let c = choices(&a, "workload.readers");
        assert!(c.iter().find(|c| c.value == "10").unwrap().current);
        // Sizes keep their units; auto comes first.
        let v = values("cache.size", &Settings::default());
        assert_eq!(v[0], "auto", "{v:?}");
        // A free-form value: the current one only.
        assert_eq!(values("kernel.dir", &Settings::default()).len(), 1);
    }

    #[test]
    fn values_that_cannot_be_used_say_why() {
        let a = crate::tui::fixture::app(false);
        // The fixture's machine refuses nice -20.
        let c = choices(&a, "workers.highpri");
        let on = c.iter().find(|c| c.value == "true").unwrap();
        assert!(on.current, "the default asks for highpri");
        // Sync reads cannot sleep plain: with engine = sync, sleep's other
        // values are greyed with the engine's reason.
        let mut s = a.settings.clone();
        s.workload.engine = EngineKind::Sync;
        let mut b = a.clone();
        b.set_running(s.clone(), s);
        let c = choices(&b, "workload.sleep");
        let plain = c.iter().find(|c| c.value == "plain").unwrap();
        assert!(
            plain.why.as_deref().unwrap().contains("iowait"),
            "{plain:?}"
        );
        // Every value of every key parses back (the lists never offer a
        // value the parser refuses).
        for k in settings::KEYS {
            for v in values(k.key, &a.settings) {
                let mut n = a.settings.clone();
                n.set(k.key, &v)
                    .unwrap_or_else(|e| panic!("{} = {v}: {e}", k.key));
            }
        }
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
                .contains("key=value")
        );
        // "settle=1" is a key named settle, not set + tle.
        assert_eq!(parse_command("settle=1").unwrap().0, "settle");
        let a = crate::tui::fixture::app(false);
        let s = command_settings(&a, "set workers.verify_mode=unbound").unwrap();
        let d = a.settings.diff(&s);
        assert_eq!(d.len(), 1);
        assert_eq!(
            (d[0].key.as_str(), d[0].to.as_str()),
            ("workers.verify_mode", "unbound")
        );
        let e = command_settings(&a, "set workers.verify_mode=boundd").unwrap_err();
        for want in [
            "workers.verify_mode",
            "boundd",
            "same, inline, bound, unbound",
        ] {
            assert!(e.contains(want), "{want:?} in {e}");
        }
        let e = command_settings(&a, "workers.verfy_mode=bound").unwrap_err();
        assert!(e.contains("workers.verify_mode"), "a suggestion: {e}");
        let e = command_settings(&a, "workload.queue_depth=5000").unwrap_err();
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
        a.overlay = open_prompt();
        for c in "set workers.verify_mode=nope".chars() {
            prompt_key(&mut a, k(KeyCode::Char(c)));
        }
        assert_eq!(prompt_key(&mut a, k(KeyCode::Enter)), OverlayAction::None);
        assert!(
            matches!(&a.overlay, Overlay::Prompt { error: Some(e), .. } if e.contains("nope")),
            "{:?}",
            a.overlay
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
            panic!("{:?}", a.overlay)
        };
        assert_eq!(s.workers.verify_mode, VerifyMode::Unbound);
        assert_eq!(a.overlay, Overlay::None);
        // Up recalls the last command, then the one before.
        a.overlay = open_prompt();
        prompt_key(&mut a, k(KeyCode::Up));
        assert!(
            matches!(&a.overlay, Overlay::Prompt { text, .. } if text == "set workers.verify_mode=unbound")
        );
        prompt_key(&mut a, k(KeyCode::Up));
        assert!(matches!(&a.overlay, Overlay::Prompt { text, .. } if text.ends_with("=nope")));
        prompt_key(&mut a, k(KeyCode::Down));
        prompt_key(&mut a, k(KeyCode::Down));
        assert!(matches!(&a.overlay, Overlay::Prompt { text, .. } if text.is_empty()));
        assert_eq!(prompt_key(&mut a, k(KeyCode::Esc)), OverlayAction::None);
        assert_eq!(a.overlay, Overlay::None);
    }

    #[test]
    fn the_chooser_applies_one_change_and_refuses_a_greyed_value() {
        let mut a = crate::tui::fixture::app(false);
        a.overlay = open_chooser(&a, "workers.verify_mode");
        // From bound down to unbound: one Enter, one change.
        prompt_key(&mut a, k(KeyCode::Down)); // not a prompt: ignored
        chooser_key(&mut a, k(KeyCode::Down));
        let OverlayAction::Apply(s) = chooser_key(&mut a, k(KeyCode::Enter)) else {
            panic!("{:?}", a.overlay)
        };
        let d = a.settings.diff(&s);
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0].to, "unbound");
        assert_eq!(a.overlay, Overlay::None);
        // A greyed value: Enter says why and the chooser stays.
        let mut s = a.settings.clone();
        s.workload.engine = EngineKind::Sync;
        a.set_running(s.clone(), s);
        a.overlay = open_chooser(&a, "workload.sleep");
        chooser_key(&mut a, k(KeyCode::Down));
        assert_eq!(chooser_key(&mut a, k(KeyCode::Enter)), OverlayAction::None);
        assert!(
            matches!(&a.overlay, Overlay::Chooser { note: Some(n), .. } if n.contains("cannot be used")),
            "{:?}",
            a.overlay
        );
        assert_eq!(chooser_key(&mut a, k(KeyCode::Esc)), OverlayAction::None);
        assert_eq!(a.overlay, Overlay::None);
    }
}
