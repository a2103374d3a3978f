//! What runs and where: the settings as requested and as running, the
//! resolver's answer for them (why a setting is greyed, which do nothing),
//! the plan's label, the machine (features, CPUs, the idle and frequency
//! drivers) and the workload's place (a remote's, a lost connection, a
//! replay). The resolver's answer and the plan's label always belong to
//! the settings held: [`Running::set`] takes both settings at once and
//! works them out again. What a key may do with them is `policy.rs`'s,
//! which reads this.

use crate::engine::workload::Place;
use crate::settings::Settings;
use crate::sys::Features;

/// The settings running, what the resolver says of them, and where.
#[derive(Debug, Clone)]
pub struct Running {
    /// Settings as requested.
    settings: Settings,
    /// Settings as running (after fallbacks).
    effective: Settings,
    /// [`crate::engine::resolve()`]'s answer for the settings running: why
    /// each limited setting is limited here and which do nothing (read by
    /// the settings panel, the footer, the chooser and the keys).
    resolution: Option<crate::engine::Resolution>,
    /// Where each stage runs, e.g. "decrypt: unbound -> verify: bound".
    plan: String,
    /// The pods of the unbound queues running, "pods cache 0-3|4-7"
    /// (None: no unbound queue, or not known, as in a replay).
    pods: Option<String>,
    /// The idle and frequency drivers, and whether anything reads iowait:
    /// ("idle haltpoll, no cpufreq", false). None in replays.
    idle: Option<(String, bool)>,
    /// Why `workload.sleep` changes no speed here (nothing reads iowait),
    /// said once, when that setting is first changed.
    iowait_note: Option<String>,
    /// Kernel and CPU features.
    features: Features,
    /// Online CPUs.
    cpus: usize,
    /// Where the workload runs when not here (`ssh:phone`), for the header.
    place: Option<Place>,
    /// Why a remote workload's records stopped (the connection was lost):
    /// the charts stay, the header says so.
    lost: Option<String>,
    /// Set when replaying a recording: what the header says ("replay 2x").
    replay: Option<String>,
}

impl Running {
    /// `settings` asked for, `effective` running, on a machine with
    /// `features` and `cpus` online CPUs.
    pub fn new(
        settings: Settings,
        effective: Settings,
        features: Features,
        cpus: usize,
    ) -> Running {
        let plan = crate::engine::stages::Plan::label(&effective);
        let resolution = resolution_of(&settings, &effective, &features);
        Running {
            settings,
            effective,
            resolution,
            plan,
            pods: None,
            idle: None,
            iowait_note: None,
            features,
            cpus,
            place: None,
            lost: None,
            replay: None,
        }
    }

    /// Records the settings now running.
    pub fn set(&mut self, requested: Settings, effective: Settings) {
        self.plan = crate::engine::stages::Plan::label(&effective);
        self.resolution = resolution_of(&requested, &effective, &self.features);
        self.settings = requested;
        self.effective = effective;
    }

    /// A recorded change (`key` to `to`), followed in a replay: the
    /// settings as recorded, asked for and running alike. A value that
    /// does not parse leaves that side as it was.
    pub fn follow(&mut self, key: &str, to: &str) {
        let (mut s, mut e) = (self.settings.clone(), self.effective.clone());
        let _ = s.set(key, to);
        let _ = e.set(key, to);
        self.set(s, e);
    }

    /// Settings as requested.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Settings as running (after fallbacks).
    pub fn effective(&self) -> &Settings {
        &self.effective
    }

    /// Where each stage runs, e.g. "decrypt: unbound -> verify: bound".
    pub fn plan(&self) -> &str {
        &self.plan
    }

    /// The plan in fewer columns ("dec unbound -> ver bound"), for a
    /// header too narrow for [`Running::plan`].
    pub fn plan_short(&self) -> String {
        crate::engine::stages::Plan::short_label(&self.effective)
    }

    /// Kernel and CPU features.
    pub fn features(&self) -> &Features {
        &self.features
    }

    /// Online CPUs.
    pub fn cpus(&self) -> usize {
        self.cpus
    }

    /// The pods of the unbound queues running, if any and known.
    pub fn pods(&self) -> Option<&str> {
        self.pods.as_deref()
    }

    /// The workload's unbound pods changed (or became known).
    pub fn set_pods(&mut self, pods: Option<String>) {
        self.pods = pods;
    }

    /// The idle and frequency drivers, and whether anything reads iowait.
    pub fn idle(&self) -> Option<&(String, bool)> {
        self.idle.as_ref()
    }

    /// The machine's idle and frequency drivers, and whether anything
    /// reads iowait (a live workload's; a replay has none).
    pub fn set_idle(&mut self, drivers: String, iowait_read: bool) {
        self.idle = Some((drivers, iowait_read));
    }

    /// What to say when `workload.sleep` is first changed: that nothing
    /// here reads iowait (the machine's notice), if so.
    pub fn set_iowait_note(&mut self, note: Option<String>) {
        self.iowait_note = note;
    }

    /// The iowait note, once: taken when `workload.sleep` changes.
    pub fn take_iowait_note(&mut self) -> Option<String> {
        self.iowait_note.take()
    }

    /// Where the workload runs when not here.
    pub fn place(&self) -> Option<&Place> {
        self.place.as_ref()
    }

    /// The workload's place as it says now; true if that changed.
    pub fn moved_to(&mut self, place: Option<Place>) -> bool {
        let changed = place != self.place;
        self.place = place;
        changed
    }

    /// Why a remote workload's records stopped, if they did.
    pub fn lost(&self) -> Option<&str> {
        self.lost.as_deref()
    }

    /// The connection to a remote workload was lost, for `why`.
    pub fn lose(&mut self, why: String) {
        self.lost = Some(why);
    }

    /// Connected again, to the workload at `place`.
    pub fn reconnected(&mut self, place: Option<Place>) {
        self.lost = None;
        self.place = place;
    }

    /// What the header says of a replay ("replay 2x"), if one.
    pub fn replay(&self) -> Option<&str> {
        self.replay.as_deref()
    }

    /// This is a replay of a recording, `label` in the header.
    pub fn set_replay(&mut self, label: String) {
        self.replay = Some(label);
    }

    /// Where the explorer runs, for which keys work here.
    pub fn mode(&self) -> crate::tui::keys::Mode {
        crate::tui::keys::Mode {
            replay: self.replay.is_some(),
            remote: self.place.is_some(),
        }
    }

    /// Why a setting is not (fully) available here, if it is not: greyed in
    /// the settings panel with this reason.
    pub fn unavailable(&self, key: &str) -> Option<String> {
        self.resolution.as_ref()?.limit(key).map(str::to_string)
    }

    /// [`crate::engine::resolve()`]'s answer for the settings running, if
    /// they resolve.
    pub fn resolution(&self) -> Option<&crate::engine::Resolution> {
        self.resolution.as_ref()
    }

    /// Whether a setting does nothing in the configuration running (the
    /// footer leaves its key out; pressing it says why).
    pub fn inert(&self, key: &str) -> bool {
        self.resolution
            .as_ref()
            .is_some_and(|r| r.inert.contains(&key))
    }
}

/// What [`crate::engine::resolve()`] answers for `requested` on a machine
/// with `features`, the filesystem as the settings that ran tell it
/// ([`crate::engine::DataFs::inferred`]).
fn resolution_of(
    requested: &Settings,
    effective: &Settings,
    features: &Features,
) -> Option<crate::engine::Resolution> {
    let fs = crate::engine::DataFs::inferred(requested, effective);
    crate::engine::resolve(requested, features, &fs).ok()
}
