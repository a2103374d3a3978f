//! The mouse and the settings panel's cursor, as btop, bottom and trippy
//! users expect them: a click on a settings row selects it and opens its
//! value chooser, a click in the chooser picks, the wheel scrolls the help
//! and the events panel, and a click on a chart reads its exact values at
//! that time. Where a click lands is [`super::render::layout::hit`], the
//! same layout the screen is drawn with. Pure: an event and the [`App`] in,
//! the app changed and what to apply out; the terminal loop feeds it
//! crossterm [`MouseEvent`]s parsed by [`super::input`].

use ratatui::crossterm::event::{MouseButton, MouseEvent, MouseEventKind};
use ratatui::layout::Rect;

use super::app::App;
use super::keys::Action;
use super::overlay::{self, OverlayAction};
use super::render::layout::{self, ChooserHit, Hit};
use super::state::{Overlay, Readout};

/// What a replay says when a live-only key or click asks to change a
/// setting.
pub const REPLAY_REFUSAL: &str =
    "replay: the settings are as recorded (space pauses, arrows move 10 s)";

/// Lines the wheel scrolls per notch.
const WHEEL_LINES: u64 = 3;

/// The screen the app was last drawn on, or a roomy one before the first
/// frame (tests, a key before any draw).
fn screen(app: &App) -> Rect {
    let s = app.view.screen();
    if s.width == 0 || s.height == 0 {
        Rect::new(0, 0, 160, 48)
    } else {
        s
    }
}

/// The settings the cursor steps through: the settings panel's rows as
/// drawn on the current screen, top to bottom.
pub fn cursor_rows(app: &App) -> Vec<&'static str> {
    layout::main_layout(app, screen(app))
        .setting_rows
        .into_iter()
        .map(|(_, k)| k)
        .collect()
}

/// Handles the settings panel's actions (cursor, chooser, `:`) for the
/// live explorer (`live`) or a replay (which refuses the chooser and the
/// prompt with [`REPLAY_REFUSAL`]); false for any other action.
pub fn panel_action(app: &mut App, action: &Action, live: bool) -> bool {
    match action {
        Action::CursorUp | Action::CursorDown if app.view.focus() == Some("events") => {
            let events = layout::main_layout(app, screen(app)).events;
            let oldest = layout::events_oldest(app, events);
            app.log.scroll(*action == Action::CursorUp, 1, oldest);
        }
        Action::FocusNext | Action::FocusPrev => step_focus(app, *action == Action::FocusNext),
        Action::CursorUp | Action::CursorDown => {
            let rows = cursor_rows(app);
            app.view.step_cursor(&rows, *action == Action::CursorDown);
        }
        Action::OpenChooser | Action::OpenPrompt if !live => app.flash(REPLAY_REFUSAL),
        Action::OpenChooser => match app.view.cursor() {
            Some(key) => {
                let chooser = overlay::chooser::open_chooser(app, key);
                app.overlays.open(chooser);
            }
            None => app
                .flash("↑↓ select a setting first (or click its row); Enter then lists its values"),
        },
        Action::OpenPrompt => app.overlays.open(overlay::prompt::open_prompt()),
        _ => return false,
    }
    true
}

/// Tab (`forward`) or Shift-Tab: the focus to the next (previous) panel
/// of [`layout::focus_stops`], round the ends; from none, the first (the
/// last). On the settings panel the focus is its cursor (the row it was
/// on, else the top one); elsewhere the cursor and a chart's readout go.
/// Presentation mode has no panels to focus.
pub fn step_focus(app: &mut App, forward: bool) {
    let area = screen(app);
    if !layout::shows_main(app, area) {
        return;
    }
    let l = layout::main_layout(app, area);
    let stops = layout::focus_stops(&l);
    let here = match (app.view.focus(), app.view.cursor()) {
        (Some(t), _) => stops.iter().position(|s| *s == t),
        (None, Some(_)) => stops.iter().position(|s| *s == "settings"),
        (None, None) => None,
    };
    let n = stops.len();
    let i = match (here, forward) {
        (None, true) => 0,
        (None, false) => n - 1,
        (Some(i), true) => (i + 1) % n,
        (Some(i), false) => (i + n - 1) % n,
    };
    if stops[i] == "settings" {
        let rows: Vec<&'static str> = l.setting_rows.iter().map(|(_, k)| *k).collect();
        app.view.focus_settings(&rows);
    } else {
        app.view.focus_panel(Some(stops[i]));
    }
}

/// Handles a mouse event; `live` is false in a replay (no settings change
/// there). Returns what to apply, as a key in an overlay does.
pub fn mouse(app: &mut App, ev: MouseEvent, live: bool) -> OverlayAction {
    let area = screen(app);
    let (x, y) = (ev.column, ev.row);
    let click = matches!(ev.kind, MouseEventKind::Down(MouseButton::Left));
    let wheel = match ev.kind {
        MouseEventKind::ScrollUp => Some(true),
        MouseEventKind::ScrollDown => Some(false),
        _ => None,
    };
    let mode = app.running.mode();
    match app.overlays.current_mut() {
        Overlay::Help { scroll, find, .. } => {
            if let Some(up) = wheel {
                let most = super::help::line_count(mode, find, 76);
                *scroll = if up {
                    scroll.saturating_sub(WHEEL_LINES as usize)
                } else {
                    (*scroll + WHEEL_LINES as usize).min(most)
                };
            }
            return OverlayAction::None;
        }
        Overlay::Chooser {
            items, selected, ..
        } => {
            if let Some(up) = wheel {
                *selected = if up {
                    selected.saturating_sub(1)
                } else {
                    (*selected + 1).min(items.len().saturating_sub(1))
                };
                return OverlayAction::None;
            }
            if !click {
                return OverlayAction::None;
            }
            return match layout::chooser_hit(area, items.len(), *selected, x, y) {
                ChooserHit::Outside => {
                    app.overlays.close();
                    OverlayAction::None
                }
                ChooserHit::Inside => OverlayAction::None,
                ChooserHit::Value(i) => {
                    *selected = i;
                    overlay::chooser::pick(app)
                }
            };
        }
        Overlay::None => {}
        // The picker, the prompts and messages are keyboard-only.
        _ => return OverlayAction::None,
    }
    let hit = layout::hit(app, area, x, y);
    if let Some(up) = wheel {
        if hit == Hit::Events {
            let events = layout::main_layout(app, area).events;
            let oldest = layout::events_oldest(app, events);
            app.log.scroll(up, WHEEL_LINES, oldest);
        }
        return OverlayAction::None;
    }
    if !click {
        return OverlayAction::None;
    }
    // A click focuses what it lands on: `?` then explains it.
    match hit {
        Hit::Setting(key) => {
            app.view.select_setting(key);
            panel_action(app, &Action::OpenChooser, live);
        }
        Hit::Chart(chart, t_s) => app.view.read_chart(Readout { chart, t_s }),
        Hit::Panel(topic) => app.view.focus_panel(Some(topic)),
        Hit::Events => app.view.focus_panel(Some("events")),
        Hit::ChartFrame(_) => app.view.focus_panel(Some("axes")),
        Hit::Nothing => app.view.focus_panel(None),
    }
    OverlayAction::None
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::crossterm::event::KeyModifiers;

    fn ev(kind: MouseEventKind, x: u16, y: u16) -> MouseEvent {
        MouseEvent {
            kind,
            column: x,
            row: y,
            modifiers: KeyModifiers::NONE,
        }
    }

    fn click(x: u16, y: u16) -> MouseEvent {
        ev(MouseEventKind::Down(MouseButton::Left), x, y)
    }

    #[test]
    fn the_cursor_moves_over_the_rows_shown_and_stops_at_the_ends() {
        // On the fixture at 80x24 the panel shows only the keyed settings.
        let mut a = crate::tui::fixture::app(false);
        a.view.set_screen(Rect::new(0, 0, 80, 24));
        let rows = cursor_rows(&a);
        assert!(
            rows.contains(&"workers.mode") && !rows.contains(&"workload.pattern"),
            "{rows:?}"
        );
        // Tall enough for every setting beside 8 lines of events.
        a.view.set_screen(Rect::new(0, 0, 160, 60));
        assert!(cursor_rows(&a).contains(&"workload.pattern"));
        assert!(panel_action(&mut a, &Action::CursorDown, true));
        assert_eq!(a.view.cursor(), Some("workload.target"));
        assert!(panel_action(&mut a, &Action::OpenChooser, true));
        assert!(matches!(
            a.overlays.current(),
            Overlay::Chooser {
                key: "workload.target",
                ..
            }
        ));
        // A replay refuses the chooser and the prompt, and says why.
        let mut r = crate::tui::fixture::app(false);
        r.running.set_replay("replay 1x".into());
        r.view.select_setting("workers.mode");
        panel_action(&mut r, &Action::OpenChooser, false);
        panel_action(&mut r, &Action::OpenPrompt, false);
        assert_eq!(*r.overlays.current(), Overlay::None);
        assert_eq!(r.flash_text(), Some(REPLAY_REFUSAL));
    }

    #[test]
    fn clicks_select_rows_pick_values_and_read_charts() {
        let mut a = crate::tui::fixture::app(false);
        a.view.set_screen(Rect::new(0, 0, 160, 48));
        let l = layout::main_layout(&a, a.view.screen());
        let &(y, key) = l
            .setting_rows
            .iter()
            .find(|(_, k)| *k == "workers.verify_mode")
            .unwrap();
        assert_eq!(mouse(&mut a, click(5, y), true), OverlayAction::None);
        assert_eq!(a.view.cursor(), Some(key));
        let Overlay::Chooser {
            items, selected, ..
        } = a.overlays.current()
        else {
            panic!("{:?}", a.overlays.current())
        };
        let (n, sel) = (items.len(), *selected);
        // A click on "unbound" (the fourth value) applies it.
        let (_, list, first) = layout::chooser_geometry(a.view.screen(), n, sel);
        let row = list.y + (3 - first) as u16;
        let OverlayAction::Apply(s) = mouse(&mut a, click(list.x + 2, row), true) else {
            panic!("{:?}", a.overlays.current())
        };
        assert_eq!(a.running.settings().diff(&s)[0].to, "unbound");
        assert_eq!(*a.overlays.current(), Overlay::None);
        // A click outside a chooser closes it.
        mouse(&mut a, click(5, y), true);
        mouse(&mut a, click(0, 0), true);
        assert_eq!(*a.overlays.current(), Overlay::None);
        // A chart click reads it; Esc (or a click elsewhere) lets go.
        let (kind, r) = l.charts[1];
        let p = crate::tui::render::chart::plot_rect(r, true).unwrap();
        mouse(&mut a, click(p.x + 10, p.y + 2), true);
        let ro = a.view.readout().expect("a readout");
        assert_eq!(ro.chart, kind);
        assert!(a.view.escape());
        assert_eq!(a.view.readout(), None);
        mouse(&mut a, click(p.x + 10, p.y + 2), true);
        mouse(&mut a, click(0, 0), true);
        assert_eq!(a.view.readout(), None);
        // In a replay a row click selects and says why nothing opens.
        a.running.set_replay("replay 1x".into());
        mouse(&mut a, click(5, y), false);
        assert_eq!(*a.overlays.current(), Overlay::None);
        assert_eq!(a.flash_text(), Some(REPLAY_REFUSAL));
    }

    #[test]
    fn the_wheel_scrolls_the_events_without_being_yanked() {
        let mut a = crate::tui::fixture::app(false);
        for i in 0..30 {
            a.log.line(45.0, format!("event {i}"), false);
        }
        a.view.set_screen(Rect::new(0, 0, 80, 24));
        let l = layout::main_layout(&a, a.view.screen());
        let (x, y) = (l.events.x + 2, l.events.y + 1);
        mouse(&mut a, ev(MouseEventKind::ScrollUp, x, y), true);
        let anchor = a.log.anchor().expect("scrolled");
        assert_eq!(anchor, a.log.newest() - 3);
        // New lines do not move the view.
        a.log.line(46.0, "later".into(), false);
        assert_eq!(a.log.anchor(), Some(anchor));
        // Far back, it stops where the panel is still full.
        for _ in 0..100 {
            mouse(&mut a, ev(MouseEventKind::ScrollUp, x, y), true);
        }
        let oldest = layout::events_oldest(&a, l.events);
        assert_eq!(a.log.anchor(), Some(oldest));
        // There the panel shows the first line logged (its start, as it
        // is longer than the panel, and where the rest is).
        let th = crate::tui::theme::Theme::named(crate::tui::theme::ThemeName::Dark);
        let look = crate::tui::render::Look {
            theme: th,
            ascii: false,
        };
        let mut buf = ratatui::buffer::Buffer::empty(a.view.screen());
        crate::tui::render::render(&a, &look, a.view.screen(), &mut buf);
        let top: String = (l.events.x..l.events.x + l.events.width)
            .map(|x| buf[(x, l.events.y + 1)].symbol().to_string())
            .collect();
        assert!(top.contains("0.0s workers.highpri"), "{top}");
        let last: String = (l.events.x..l.events.x + l.events.width)
            .map(|x| {
                buf[(x, l.events.y + l.events.height - 2)]
                    .symbol()
                    .to_string()
            })
            .collect();
        assert!(last.contains("… whole in the summary (q)"), "{last}");
        // Down to the newest follows again.
        for _ in 0..100 {
            mouse(&mut a, ev(MouseEventKind::ScrollDown, x, y), true);
        }
        assert_eq!(a.log.anchor(), None);
        // The wheel over the help scrolls it.
        a.overlays.open(Overlay::help());
        mouse(&mut a, ev(MouseEventKind::ScrollDown, 40, 10), true);
        assert!(matches!(
            a.overlays.current(),
            Overlay::Help { scroll: 3, .. }
        ));
    }
}
