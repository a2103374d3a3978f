//! The value chooser: Enter on a settings row (or a click on it) lists the
//! setting's values, the current one marked, and applies the one picked.
//! Going from `unbound` to `bound` with `W` passes through every value
//! between, each one applied to the running workload and marked on the
//! charts; here the value is picked and applied as one change, through the
//! same [`super::OverlayAction::Apply`] a key's change takes. The lists are
//! pure (settings in, values out) and unit-tested; a value is greyed for the
//! reasons the engine would refuse it ([`Settings::validate`],
//! [`crate::engine::resolve()`]), found by [`policy::refusal`]. The `:`
//! prompt, the other way to set a value, completes values from [`values`].

use ratatui::crossterm::event::{KeyCode, KeyEvent};

use super::{OverlayAction, ctrl_c};
use crate::settings::{self, Settings};
use crate::tui::app::App;
use crate::tui::policy;
use crate::tui::state::{Choice, Overlay, Running};

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
pub fn choices(run: &Running, key: &str) -> Vec<Choice> {
    let settings = run.settings();
    let current = settings.get(key).unwrap_or_default();
    values(key, settings)
        .into_iter()
        .map(|value| {
            let why = if value == current {
                None
            } else {
                let mut n = settings.clone();
                match n.set(key, &value) {
                    Ok(()) => policy::refusal(run, &n, key),
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
    let items = choices(&app.running, key);
    let selected = items.iter().position(|c| c.current).unwrap_or(0);
    Overlay::Chooser {
        key,
        items,
        selected,
        note: None,
    }
}

/// A key while the chooser is open: Up/Down (or k/j) move, Home/End,
/// Enter applies the highlighted value (a greyed one says why instead),
/// Esc or q closes, Ctrl-C quits.
pub fn chooser_key(app: &mut App, key: KeyEvent) -> OverlayAction {
    if ctrl_c(&key) {
        app.overlays.close();
        return OverlayAction::Quit;
    }
    let Overlay::Chooser {
        key: setting,
        items,
        selected,
        note,
    } = app.overlays.current_mut()
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
        KeyCode::Esc | KeyCode::Char('q') => app.overlays.close(),
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
    } = app.overlays.current_mut()
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
    let mut n = app.running.settings().clone();
    match n.set(key, &item.value) {
        Ok(()) => {
            app.overlays.close();
            OverlayAction::Apply(Box::new(n))
        }
        Err(e) => {
            *note = Some(e.to_string());
            OverlayAction::None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::EngineKind;
    use ratatui::crossterm::event::KeyModifiers;

    fn k(c: KeyCode) -> KeyEvent {
        KeyEvent::new(c, KeyModifiers::NONE)
    }

    #[test]
    fn an_enum_offers_every_variant_the_current_one_marked() {
        let a = crate::tui::fixture::app(false);
        let c = choices(&a.running, "workers.verify_mode");
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
        let v = values("workload.block_size", a.running.settings());
        assert_eq!(v.first().unwrap(), "4K");
        assert_eq!(v.last().unwrap(), "1M");
        assert_eq!(v.len(), 9, "{v:?}");
        let mut s = a.running.settings().clone();
        s.workload.readers = 10;
        a.running.set(s.clone(), s);
        let v = values("workload.readers", a.running.settings());
        let i = v
            .iter()
            .position(|x| x == "10")
            .expect("current value listed");
        assert_eq!((v[i - 1].as_str(), v[i + 1].as_str()), ("8", "16"), "{v:?}");
        let c = choices(&a.running, "workload.readers");
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
        let c = choices(&a.running, "workers.highpri");
        let on = c.iter().find(|c| c.value == "true").unwrap();
        assert!(on.current, "the default asks for highpri");
        // Sync reads cannot sleep plain: with engine = sync, sleep's other
        // values are greyed with the engine's reason.
        let mut s = a.running.settings().clone();
        s.workload.engine = EngineKind::Sync;
        let mut b = a.clone();
        b.running.set(s.clone(), s);
        let c = choices(&b.running, "workload.sleep");
        let plain = c.iter().find(|c| c.value == "plain").unwrap();
        assert!(
            plain.why.as_deref().unwrap().contains("iowait"),
            "{plain:?}"
        );
        // Every value of every key parses back (the lists never offer a
        // value the parser refuses).
        for k in settings::KEYS {
            for v in values(k.key.name(), a.running.settings()) {
                let mut n = a.running.settings().clone();
                n.set(k.key, &v)
                    .unwrap_or_else(|e| panic!("{} = {v}: {e}", k.key));
            }
        }
    }

    #[test]
    fn the_chooser_applies_one_change_and_refuses_a_greyed_value() {
        let mut a = crate::tui::fixture::app(false);
        a.overlays.open(open_chooser(&a, "workers.verify_mode"));
        // From bound down to unbound: one Enter, one change.
        chooser_key(&mut a, k(KeyCode::Down));
        let OverlayAction::Apply(s) = chooser_key(&mut a, k(KeyCode::Enter)) else {
            panic!("{:?}", a.overlays.current())
        };
        let d = a.running.settings().diff(&s);
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0].to, "unbound");
        assert_eq!(*a.overlays.current(), Overlay::None);
        // A greyed value: Enter says why and the chooser stays.
        let mut s = a.running.settings().clone();
        s.workload.engine = EngineKind::Sync;
        a.running.set(s.clone(), s);
        a.overlays.open(open_chooser(&a, "workload.sleep"));
        chooser_key(&mut a, k(KeyCode::Down));
        assert_eq!(chooser_key(&mut a, k(KeyCode::Enter)), OverlayAction::None);
        assert!(
            matches!(a.overlays.current(), Overlay::Chooser { note: Some(n), .. } if n.contains("cannot be used")),
            "{:?}",
            a.overlays.current()
        );
        assert_eq!(chooser_key(&mut a, k(KeyCode::Esc)), OverlayAction::None);
        assert_eq!(*a.overlays.current(), Overlay::None);
    }
}
