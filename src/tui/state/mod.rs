//! The explorer's state, in parts that each keep their own invariants:
//! [`App`](super::app::App) holds one of each and does only what takes
//! more than one (a record's events become markers, log lines, a caption
//! or an A/B's expected switch). Every field here is private; what may
//! change a part is its methods, named for what happens
//! (`view.select_setting`, `overlays.open`, `window.zoom`), so the
//! terminal loop, the mouse and the drivers say what they do and the
//! drawing code (`render/`) only reads. No terminal, and nothing here
//! reads the keys' policy, the overlays' key handling or the drawing.
//!
//! - [`window`]: the records, the change markers, the time window and the
//!   "now" window slid over them;
//! - [`baseline`]: the baseline and A/B (`b`, `B`, `A`);
//! - [`running`]: the settings running, what the resolver says of them,
//!   and where the workload runs;
//! - [`view`]: what the user points at (cursor, focus, a chart's
//!   readout), presentation mode, the pause, the screen and its cost;
//! - [`overlays`]: which overlay is open, and the `:` prompt's memory;
//! - [`log`]: the events panel's lines, its scroll, the footer's flash;
//! - [`lanes`]: the timeline (`t`): the spans of where each work item
//!   ran, its window, its freeze and the item chosen;
//! - [`show`]: what a preset or a demo adds (its name, published result,
//!   caption, big numbers, step).

pub(crate) mod baseline;
pub(crate) mod lanes;
pub(crate) mod log;
pub(crate) mod overlays;
pub(crate) mod running;
pub(crate) mod show;
pub(crate) mod view;
pub(crate) mod window;

pub use baseline::{Baseline, Comparison, MIN_WINDOWS, NotYet};
pub use lanes::{DEFAULT_LANE_WINDOW_MS, LANE_WINDOWS_MS, Lanes};
pub use log::{FIRST_HINT, Log, LogLine};
pub use overlays::{Choice, Overlay, Overlays, PickItem};
pub use running::Running;
pub use show::Show;
pub use view::{ChartKind, Readout, UiCost, View};
pub use window::{DEFAULT_WINDOW_S, HISTORY_S, Marker, Window, ZOOM_STEPS_S};
