//! What the explorer and the demo player drive: a running workload, here
//! or on another machine. The local [`Engine`] is one; a remote agent
//! reached over ssh or adb (`crate::remote`) is another. Both give the same
//! interval records on a channel and take the same changes, so the
//! explorer never knows where the reads happen.

use std::sync::mpsc::Receiver;

use super::{Engine, EngineError};

/// Where a workload runs when not here, as the header shows it: its name
/// first (never dropped), what it is, and how its link is doing.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Place {
    /// The target as the user named it: `ssh:pixel`, `vm:6.1-switches`.
    pub name: String,
    /// What it is, where known: `(pixel)`, `(6.1.192, tcg: times
    /// emulated, 12x slower)`.
    pub detail: Option<String>,
    /// How its records arrive, where not on time: `lag 2.3 s`, `silent
    /// 5 s`.
    pub health: Vec<String>,
}

impl Place {
    /// A place by `name` alone.
    pub fn named(name: impl Into<String>) -> Place {
        Place {
            name: name.into(),
            ..Place::default()
        }
    }

    /// All of it on one line: `ssh:pixel (pixel) · lag 2.3 s`.
    pub fn line(&self) -> String {
        let mut s = self.name.clone();
        if let Some(d) = &self.detail {
            s.push(' ');
            s.push_str(d);
        }
        for h in &self.health {
            s.push_str(" · ");
            s.push_str(h);
        }
        s
    }
}
use crate::metrics::IntervalRecord;
use crate::settings::{SettingChange, Settings};
use crate::sys::{Features, MachineInfo};

/// A running workload the explorer can drive.
pub trait Workload {
    /// The settings as requested.
    fn settings(&self) -> &Settings;
    /// The settings as running: after the resolver's fallbacks, and what
    /// the kernel refused the running threads since.
    fn effective(&self) -> Settings;
    /// What the kernel and machine offer.
    fn features(&self) -> &Features;
    /// The machine the workload runs on.
    fn machine(&self) -> MachineInfo;
    /// One record per interval, in order.
    fn records(&self) -> &Receiver<IntervalRecord>;
    /// Runs with these settings from now on; the changes made.
    fn apply(&mut self, new: Settings) -> Result<Vec<SettingChange>, EngineError>;
    /// Adds a marker event (`baseline`) to the next record.
    fn mark_event(&self, label: &str);
    /// Pauses the workload.
    fn pause(&mut self);
    /// Resumes a paused workload.
    fn resume(&mut self) -> Result<(), EngineError>;
    /// True while paused.
    fn is_paused(&self) -> bool;
    /// Drops the page cache of the file; the pages dropped, if known.
    fn drop_cache(&mut self) -> Option<usize>;
    /// Records where each work item ran (the timeline's spans, in the
    /// records' `timeline`) from now on, or stops; why not where the
    /// target cannot.
    fn trace(&mut self, on: bool) -> Result<(), String> {
        let _ = on;
        Err("this target's spans are not traced yet".into())
    }
    /// The pods of the unbound queues running (`pods cache 0-3|4-7`).
    fn pods(&self) -> Option<String>;
    /// Where it runs, for the header: None here, a [`Place`] elsewhere.
    fn place(&self) -> Option<Place> {
        None
    }
    /// Why the records stopped coming, when they did (a lost connection).
    fn lost(&self) -> Option<String> {
        None
    }
    /// Starts a lost remote workload again with its last settings (None:
    /// this workload is not remote).
    fn reconnect(&mut self) -> Option<Result<(), EngineError>> {
        None
    }
}

impl Workload for Engine {
    fn settings(&self) -> &Settings {
        Engine::settings(self)
    }
    fn effective(&self) -> Settings {
        Engine::effective(self)
    }
    fn features(&self) -> &Features {
        Engine::features(self)
    }
    fn machine(&self) -> MachineInfo {
        crate::sys::machine_info(self.dataset().dir())
    }
    fn records(&self) -> &Receiver<IntervalRecord> {
        Engine::records(self)
    }
    fn apply(&mut self, new: Settings) -> Result<Vec<SettingChange>, EngineError> {
        Engine::apply(self, new)
    }
    fn mark_event(&self, label: &str) {
        self.mark(label);
    }
    fn pause(&mut self) {
        Engine::pause(self);
    }
    fn resume(&mut self) -> Result<(), EngineError> {
        Engine::resume(self)
    }
    fn is_paused(&self) -> bool {
        Engine::is_paused(self)
    }
    fn drop_cache(&mut self) -> Option<usize> {
        Engine::drop_cache(self)
    }
    fn trace(&mut self, on: bool) -> Result<(), String> {
        Engine::trace(self, on)
    }
    fn pods(&self) -> Option<String> {
        super::pipeline::pods_label(&Engine::effective(self))
    }
}
