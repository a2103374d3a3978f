//! Which overlay is drawn over the main screen (the help, an error, the
//! preset picker, the save dialog, the value chooser, the `:` prompt)
//! with what each holds, and the commands entered at the prompt, which
//! outlive it. One overlay at most is open; what a key does in it is
//! `overlay/`'s, which edits the open one through [`Overlays::current_mut`],
//! and drawing it is `render/`'s.

use crate::settings::Settings;

/// Commands the prompt remembers for Up.
const HISTORY: usize = 50;

/// What is drawn over the main screen.
#[derive(Debug, Clone, PartialEq)]
pub enum Overlay {
    /// Nothing.
    None,
    /// Every key and what the knobs mean.
    Help {
        /// The first line shown.
        scroll: usize,
        /// What the help is narrowed to (`/`), empty for all of it.
        find: String,
        /// The search is being typed.
        typing: bool,
    },
    /// An error the user must dismiss.
    Error(String),
    /// `p`: choose a preset to apply.
    Picker {
        /// The presets: (name, where from, description, settings).
        items: Vec<PickItem>,
        /// The highlighted one.
        selected: usize,
    },
    /// `s`: the name to save the current settings under.
    SaveName {
        /// The name typed (prefilled with the current preset's).
        name: String,
        /// The prefilled name is selected: typing replaces it, Backspace
        /// clears it, Right or End keeps it for appending.
        selected: bool,
        /// Why the last key was not taken (a character a name cannot have).
        refused: Option<String>,
    },
    /// Saving would replace an existing file: ask first.
    ConfirmOverwrite(String),
    /// Enter on a settings row (or a click): the setting's values to pick
    /// one from, applied as one change.
    Chooser {
        /// The setting.
        key: &'static str,
        /// Its values, the current one marked, greyed ones with why.
        items: Vec<Choice>,
        /// The highlighted one.
        selected: usize,
        /// Why the last Enter did nothing (a greyed value), or a hint.
        note: Option<String>,
    },
    /// `:`: a command (`set section.key=value`) being typed.
    Prompt {
        /// What was typed.
        text: String,
        /// The parser's error for the last Enter, shown until the next key.
        error: Option<String>,
        /// Tab's candidates when more than one fit.
        hint: Option<String>,
        /// Which remembered command Up/Down shows (None: the typed one).
        recall: Option<usize>,
    },
}

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

/// One preset in the picker.
#[derive(Debug, Clone, PartialEq)]
pub struct PickItem {
    /// Its name.
    pub name: String,
    /// "shipped" or "user".
    pub origin: &'static str,
    /// Its description, or why it is invalid.
    pub description: String,
    /// Its settings (None when the file is invalid).
    pub settings: Option<Settings>,
}

impl Overlay {
    /// The help, from its top, not searched.
    pub fn help() -> Overlay {
        Overlay::help_on(None)
    }

    /// The help narrowed to `topic` (what `?` explains: the focused
    /// panel, the cursor's setting), or all of it.
    pub fn help_on(topic: Option<String>) -> Overlay {
        Overlay::Help {
            scroll: 0,
            find: topic.unwrap_or_default(),
            typing: false,
        }
    }
}

/// The commands entered at the `:` prompt, oldest first, each once, at
/// most `HISTORY`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PromptHistory(Vec<String>);

impl PromptHistory {
    /// Remembers `cmd` as the newest (moved there if it was remembered).
    pub fn remember(&mut self, cmd: String) {
        self.0.retain(|h| *h != cmd);
        self.0.push(cmd);
        if self.0.len() > HISTORY {
            self.0.remove(0);
        }
    }

    /// The commands remembered, oldest first.
    pub fn commands(&self) -> &[String] {
        &self.0
    }
}

/// The overlay open, if any, and the prompt's memory.
#[derive(Debug, Clone)]
pub struct Overlays {
    /// Drawn over the screen.
    open: Overlay,
    /// Commands entered at the `:` prompt.
    history: PromptHistory,
}

impl Default for Overlays {
    fn default() -> Self {
        Overlays {
            open: Overlay::None,
            history: PromptHistory::default(),
        }
    }
}

impl Overlays {
    /// The overlay drawn ([`Overlay::None`]: none).
    pub fn current(&self) -> &Overlay {
        &self.open
    }

    /// The overlay drawn, for a key in it to move or edit.
    pub fn current_mut(&mut self) -> &mut Overlay {
        &mut self.open
    }

    /// The overlay drawn and the prompt's memory, both to edit (a key in
    /// the `:` prompt).
    pub fn prompt_parts(&mut self) -> (&mut Overlay, &mut PromptHistory) {
        (&mut self.open, &mut self.history)
    }

    /// Whether an overlay is open.
    pub fn is_open(&self) -> bool {
        self.open != Overlay::None
    }

    /// Opens `overlay` (over whatever was open).
    pub fn open(&mut self, overlay: Overlay) {
        self.open = overlay;
    }

    /// Opens an error box saying `message`.
    pub fn error(&mut self, message: impl Into<String>) {
        self.open = Overlay::Error(message.into());
    }

    /// Closes the overlay open, if any.
    pub fn close(&mut self) {
        self.open = Overlay::None;
    }

    /// The commands entered at the prompt.
    pub fn history(&self) -> &PromptHistory {
        &self.history
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prompt_remembers_each_command_once_and_the_latest_fifty() {
        let mut h = PromptHistory::default();
        h.remember("a".into());
        h.remember("b".into());
        h.remember("a".into());
        assert_eq!(h.commands(), ["b", "a"]);
        for i in 0..60 {
            h.remember(format!("{i}"));
        }
        assert_eq!(h.commands().len(), HISTORY);
        assert_eq!(h.commands()[0], "10");
    }
}
