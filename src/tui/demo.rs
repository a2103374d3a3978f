//! Playing a scripted demo in the explorer: the live engine's driver, plus
//! a step clock that applies each step's settings, marks the baseline and
//! shows its caption, then waits its time or for `n` (or space when the
//! step waits for a key). Captions are engine events (`caption: ...`), so a
//! recording of the demo replays them.

use std::time::Instant;

use ratatui::crossterm::event::{KeyCode, KeyEvent};

use super::app::App;
use super::{Driver, EngineDriver};
use crate::scenario::demo::{Demo, Wait};

/// Feeds the explorer from the engine and plays the demo's steps.
pub struct DemoDriver<'a> {
    /// The live engine's driver.
    pub inner: EngineDriver<'a>,
    demo: Demo,
    next: usize,
    due: Option<Instant>,
    waiting_key: bool,
}

impl<'a> DemoDriver<'a> {
    /// A demo about to run its first step.
    pub fn new(inner: EngineDriver<'a>, demo: Demo) -> Self {
        DemoDriver {
            inner,
            demo,
            next: 0,
            due: Some(Instant::now()),
            waiting_key: false,
        }
    }

    fn run_step(&mut self, app: &mut App) {
        let total = self.demo.steps.len();
        let Some(step) = self.demo.steps.get(self.next).cloned() else {
            self.due = None;
            self.waiting_key = false;
            app.show.set_step(total + 1, total, None);
            // Its A/B ends with it: the final verdict stays on the panel.
            let ended = super::stop_ab(app, self.inner.engine).map(|ab| ab.rounds());
            app.flash(match ended {
                Some(n) => format!(
                    "end of the demo: its A/B stopped after {}, the final verdict stays; explore on, or q to quit",
                    super::ab::rounds_text(n)
                ),
                None => "end of the demo: explore on, or q to quit".to_string(),
            });
            return;
        };
        self.next += 1;
        if step.baseline {
            match app.mark_baseline() {
                Ok(()) => self.inner.engine.mark_event("baseline"),
                // A step too early for a baseline says so (the demo's
                // verdicts then say they have none).
                Err(why) => app.flash(why.to_string()),
            }
        }
        if let Some(s) = step.settings {
            super::apply(app, self.inner.engine, s);
            if let Some(p) = &step.preset {
                self.inner.engine.mark_event(&format!("preset {p}"));
            }
        }
        if step.drop_cache {
            let _ = self.inner.engine.drop_cache();
        }
        if step.ab {
            super::begin_ab(app, self.inner.engine);
        }
        if let Some(c) = &step.caption {
            self.inner.engine.mark_event(&format!("caption: {c}"));
            app.show.set_caption(c.clone());
        }
        let due_s = match step.wait {
            Wait::For(d) => {
                self.due = Some(Instant::now() + d);
                self.waiting_key = false;
                Some(app.window.elapsed_s() + d.as_secs_f64())
            }
            Wait::Key => {
                self.due = None;
                self.waiting_key = true;
                None
            }
        };
        app.show.set_step(self.next, total, due_s);
    }
}

impl Driver for DemoDriver<'_> {
    fn poll(&mut self, app: &mut App) -> bool {
        let any = self.inner.poll(app);
        if self.due.is_some_and(|d| Instant::now() >= d) {
            self.run_step(app);
            return true;
        }
        any
    }

    fn key(&mut self, app: &mut App, key: KeyEvent) {
        let next =
            key.code == KeyCode::Char('n') || (self.waiting_key && key.code == KeyCode::Char(' '));
        if next && !app.overlays.is_open() {
            self.run_step(app);
        } else {
            self.inner.key(app, key);
        }
    }

    fn mouse(&mut self, app: &mut App, ev: ratatui::crossterm::event::MouseEvent) {
        self.inner.mouse(app, ev);
    }
}
