//! What a preset or a demo adds to the screen: the preset applied last
//! (the settings panel's title, the save dialog's name) and the published
//! result it reproduces (what the demo's verdict line is judged by), a
//! demo's caption, presentation mode's big numbers and the demo's step.
//! A preset applied brings its published result along; one saved keeps
//! the one there was.

use crate::scenario::demo::Headline;
use crate::scenario::preset::{Compare, Published};

/// The preset, its published result, and a demo's caption, numbers, step.
#[derive(Debug, Clone, Default)]
pub struct Show {
    /// The preset applied last: name and description.
    preset: Option<(String, String)>,
    /// The preset's comparison and the published result it reproduces
    /// (set with the preset): what a demo's verdict line is judged by.
    published: Option<(Compare, Published)>,
    /// A demo's current caption.
    caption: Option<String>,
    /// Presentation mode's big numbers (a demo's; empty: the defaults).
    headline: Vec<Headline>,
    /// A demo's progress: the step shown (1-based), the steps in all, and
    /// when the next step is due (app time, s; None: on `n`).
    demo_step: Option<(usize, usize, Option<f64>)>,
}

impl Show {
    /// The preset applied last: name and description.
    pub fn preset(&self) -> Option<&(String, String)> {
        self.preset.as_ref()
    }

    /// The preset `name` was applied: it names the settings, and its
    /// published result (if it has one) is what a demo's verdict judges.
    pub fn apply_preset(&mut self, name: &str, description: &str) {
        self.published = crate::scenario::preset::published_of(name);
        self.preset = Some((name.to_string(), description.to_string()));
    }

    /// The settings go by the preset `name` (saved under it): the
    /// published result stays as it was.
    pub fn name_preset(&mut self, name: &str, description: &str) {
        self.preset = Some((name.to_string(), description.to_string()));
    }

    /// The preset's comparison and the published result it reproduces.
    pub fn published(&self) -> Option<&(Compare, Published)> {
        self.published.as_ref()
    }

    /// A demo's current caption.
    pub fn caption(&self) -> Option<&str> {
        self.caption.as_deref()
    }

    /// A demo's step shows `caption`.
    pub fn set_caption(&mut self, caption: String) {
        self.caption = Some(caption);
    }

    /// Presentation mode's big numbers (empty: the defaults).
    pub fn headline(&self) -> &[Headline] {
        &self.headline
    }

    /// A demo's big numbers.
    pub fn set_headline(&mut self, headline: Vec<Headline>) {
        self.headline = headline;
    }

    /// A demo's progress: step shown, steps in all, when the next is due.
    pub fn demo_step(&self) -> Option<(usize, usize, Option<f64>)> {
        self.demo_step
    }

    /// A demo shows its step `step` (1-based; past `total`: the demo
    /// ended) of `total`, the next due at `due_s` (app time) or on `n`.
    pub fn set_step(&mut self, step: usize, total: usize, due_s: Option<f64>) {
        self.demo_step = Some((step, total, due_s));
    }

    /// A demo's progress for the footer at `now` (app time): `step 2/4 ·
    /// next in 12 s`, `step 3/4 · n: next`, `end of the demo (4 steps)`.
    pub fn progress(&self, now: f64) -> Option<String> {
        let (step, total, due) = self.demo_step?;
        Some(if step > total {
            format!("end of the demo ({total} steps)")
        } else if step == total && due.is_none() {
            format!("step {step}/{total}, the last · n ends the demo")
        } else {
            match due {
                Some(t) => format!(
                    "step {step}/{total} · next in {:.0} s",
                    (t - now).max(0.0).ceil()
                ),
                None => format!("step {step}/{total} · n: next"),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_demo_says_its_step_and_the_time_to_the_next() {
        let mut s = Show::default();
        let now = 8.0;
        assert_eq!(s.progress(now), None);
        s.set_step(2, 4, Some(now + 11.2));
        assert_eq!(s.progress(now).unwrap(), "step 2/4 · next in 12 s");
        s.set_step(3, 4, None);
        assert_eq!(s.progress(now).unwrap(), "step 3/4 · n: next");
        s.set_step(4, 4, None);
        assert!(s.progress(now).unwrap().contains("the last"));
        s.set_step(5, 4, None);
        assert_eq!(s.progress(now).unwrap(), "end of the demo (4 steps)");
    }
}
