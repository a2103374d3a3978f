//! Scripted demos: a TOML list of steps a talk walks through (apply
//! settings or a preset, mark the baseline, show a caption), each advanced
//! after a time or by a key, played in the explorer on a live engine. One
//! script per kernel experiment ships in `presets/demos/` and in the binary.
//!
//! ```toml
//! version = 1
//! name = "fsverity-bound-vs-unbound"
//! preset = "fsverity-bound-vs-unbound"   # where the workload starts
//! headline = ["run_delay", "queue_p99"]   # the big numbers on stage
//!
//! [[step]]
//! caption = "unbound: any CPU may pick up the verify work"
//! wait = "12s"                            # or "key": space or n goes on
//!
//! [[step]]
//! baseline = true
//! set = { "workers.mode" = "bound" }     # or preset = "NAME"
//! drop_cache = true                       # cold again: every page misses
//! caption = "bound: work stays on the CPU that completed the bio"
//! wait = "20s"
//!
//! [[step]]
//! ab = true                               # the live A/B (the `A` key)
//! caption = "interleaved rounds: baseline and bound take 5 s turns"
//! wait = "key"
//! ```

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use crate::scenario::preset::PresetError;
use crate::settings::{Settings, SettingsError};

/// The script format this readpath reads.
pub const DEMO_VERSION: u32 = 1;

/// The shipped demos: (name, TOML).
pub const SHIPPED: &[(&str, &str)] = &[
    (
        "fsverity-bound-vs-unbound",
        include_str!("../../presets/demos/fsverity-bound-vs-unbound.toml"),
    ),
    (
        "fscrypt-slow-cipher",
        include_str!("../../presets/demos/fscrypt-slow-cipher.toml"),
    ),
    (
        "fscrypt-aes-instructions",
        include_str!("../../presets/demos/fscrypt-aes-instructions.toml"),
    ),
    (
        "io_uring-qd1-iowait",
        include_str!("../../presets/demos/io_uring-qd1-iowait.toml"),
    ),
    (
        "app-cold-start",
        include_str!("../../presets/demos/app-cold-start.toml"),
    ),
];

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScript {
    version: u32,
    name: String,
    #[serde(default)]
    description: String,
    preset: Option<String>,
    #[serde(default)]
    headline: Vec<String>,
    #[serde(rename = "step", default)]
    steps: Vec<RawStep>,
}

/// A metric a demo can put in presentation mode's big numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Headline {
    /// MiB/s.
    Throughput,
    /// Reads per second.
    Iops,
    /// End-to-end median latency.
    P50,
    /// End-to-end p99 latency.
    P99,
    /// p99 of the wait in the workqueues (both queues summed).
    QueueP99,
    /// Workers' run_delay per second of wall time.
    RunDelay,
}

impl Headline {
    /// Every metric, in the order of their names.
    pub const ALL: [Headline; 6] = [
        Headline::Throughput,
        Headline::Iops,
        Headline::P50,
        Headline::P99,
        Headline::QueueP99,
        Headline::RunDelay,
    ];
    /// Presentation mode's metrics when a demo names none.
    pub const DEFAULT: [Headline; 3] = [Headline::Throughput, Headline::P99, Headline::RunDelay];
    /// At most this many are shown (beside the change box).
    pub const MAX: usize = 3;

    /// Its name in a script.
    pub fn name(self) -> &'static str {
        match self {
            Headline::Throughput => "throughput",
            Headline::Iops => "iops",
            Headline::P50 => "p50",
            Headline::P99 => "p99",
            Headline::QueueP99 => "queue_p99",
            Headline::RunDelay => "run_delay",
        }
    }

    /// Its name on screen (a box title): the metric's short name, but
    /// "throughput" for MiB/s (the box shows the unit under the number).
    pub fn title(self) -> &'static str {
        match self {
            Headline::Throughput => "throughput",
            _ => self.metric().short,
        }
    }

    /// Its metric in the one table ([`crate::metrics::METRICS`]): its
    /// value, unit and better direction come from there.
    pub fn metric(self) -> &'static crate::metrics::Metric {
        use crate::metrics::table;
        match self {
            Headline::Throughput => &table::THROUGHPUT,
            Headline::Iops => &table::IOPS,
            Headline::P50 => &table::P50,
            Headline::P99 => &table::P99,
            Headline::QueueP99 => &table::QUEUE_P99,
            Headline::RunDelay => &table::RUN_DELAY,
        }
    }

    /// Its unit on a big number (`us` becomes ms or s where larger);
    /// run_delay's ms/s is `ms` under its `run_delay/s` title.
    pub fn unit(self) -> &'static str {
        match self.metric().unit {
            crate::metrics::Unit::MsPerS => "ms",
            u => u.symbol(),
        }
    }

    /// True when a lower value is better (latencies, run_delay).
    pub fn lower_is_better(self) -> bool {
        self.metric().better == crate::metrics::Better::Lower
    }

    /// True for the metrics only worker queues have: without a queue they
    /// do not apply (hidden, not shown as zero).
    pub fn needs_queues(self) -> bool {
        matches!(self, Headline::QueueP99 | Headline::RunDelay)
    }

    /// Its value in a window's stats.
    pub fn of(self, w: &crate::metrics::WindowStats) -> f64 {
        (self.metric().window)(w)
    }

    /// Reads a script's name for it.
    pub fn parse(name: &str) -> Option<Headline> {
        Headline::ALL.into_iter().find(|h| h.name() == name)
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStep {
    #[serde(default)]
    set: BTreeMap<String, toml::Value>,
    preset: Option<String>,
    #[serde(default)]
    baseline: bool,
    #[serde(default)]
    drop_cache: bool,
    #[serde(default)]
    ab: bool,
    caption: Option<String>,
    wait: Option<String>,
}

/// When a step hands over to the next.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Wait {
    /// After this long.
    For(Duration),
    /// When the presenter presses space or n.
    Key,
}

/// One step, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// The settings from this step on (None: unchanged).
    pub settings: Option<Settings>,
    /// The preset applied, if the step names one.
    pub preset: Option<String>,
    /// Mark the baseline first.
    pub baseline: bool,
    /// Drop the page cache (after the settings), marked on the charts.
    pub drop_cache: bool,
    /// Start the live A/B (after the settings) between the baseline's
    /// settings and this step's, as the `A` key does; the next step's
    /// change of settings ends it.
    pub ab: bool,
    /// Shown until the next caption.
    pub caption: Option<String>,
    /// When to go on.
    pub wait: Wait,
}

/// A validated demo.
#[derive(Debug, Clone, PartialEq)]
pub struct Demo {
    /// Its name.
    pub name: String,
    /// What it shows.
    pub description: String,
    /// The settings it starts with.
    pub start: Settings,
    /// The starting preset's name, if any.
    pub preset: Option<String>,
    /// The steps, in order.
    pub steps: Vec<Step>,
    /// Presentation mode's big numbers (empty: [`Headline::DEFAULT`]).
    pub headline: Vec<Headline>,
}

impl Demo {
    /// How long the demo runs, for the charts' time window: its timed
    /// steps, plus 10 s for each step that waits for a key.
    pub fn length(&self) -> Duration {
        self.steps
            .iter()
            .map(|s| match s.wait {
                Wait::For(d) => d,
                Wait::Key => Duration::from_secs(10),
            })
            .sum()
    }
}

/// Shortest timed step.
const MIN_WAIT: Duration = Duration::from_millis(100);
/// Longest timed step (a talk is shorter; "key" waits for ever).
const MAX_WAIT: Duration = Duration::from_secs(86_400);

/// Why a demo could not be found, read or checked. Every error about a
/// script starts with its file (and line and column, or step, where it has
/// one).
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    /// The script file could not be read.
    #[error(transparent)]
    Read(#[from] crate::files::ReadError),
    /// Not TOML, or not a demo script's fields.
    #[error(
        "{origin}{}: {message}",
        at.map_or(String::new(), |(l, c)| format!(":{l}:{c}"))
    )]
    Parse {
        /// The file.
        origin: String,
        /// 1-based line and column, where the parser gave one.
        at: Option<(usize, usize)>,
        /// The parser's message, on one line.
        message: String,
    },
    /// Written for a newer readpath.
    #[error(
        "{origin}: version {}",
        crate::files::newer_version("demo script", found, DEMO_VERSION)
    )]
    Newer {
        /// The file.
        origin: String,
        /// Its version.
        found: u32,
    },
    /// The demo's own preset.
    #[error("{origin}: preset: {source}")]
    Preset {
        /// The file.
        origin: String,
        /// Why.
        source: Box<PresetError>,
    },
    /// A step.
    #[error("{origin}: step {step}: {problem}")]
    Step {
        /// The file.
        origin: String,
        /// The step, 1-based.
        step: usize,
        /// What is wrong with it.
        problem: Box<StepProblem>,
    },
    /// No steps.
    #[error("{origin}: no [[step]]: a demo needs at least one")]
    NoSteps {
        /// The file.
        origin: String,
    },
    /// The headline metrics.
    #[error("{origin}: headline: {problem}")]
    Headline {
        /// The file.
        origin: String,
        /// What is wrong with them.
        problem: HeadlineProblem,
    },
    /// No shipped demo of that name.
    #[error(
        "no demo named {name:?}{}: the demos are {} (or give a path to a .toml file)",
        crate::choice::did_you_mean(name, SHIPPED.iter().map(|(n, _)| *n)),
        SHIPPED.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
    )]
    NotFound {
        /// The name asked for.
        name: String,
    },
}

/// What is wrong with one step of a demo ([`DemoError::Step`]).
#[derive(Debug, thiserror::Error)]
pub enum StepProblem {
    /// Its preset.
    #[error(transparent)]
    Preset(Box<PresetError>),
    /// One of its `set` lines.
    #[error("set: {0}")]
    Set(#[source] SettingsError),
    /// Its settings, as a whole, on this machine.
    #[error(transparent)]
    Invalid(SettingsError),
    /// Its settings need more memory than this machine has.
    #[error(transparent)]
    Memory(crate::engine::memory::TooMuchMemory),
    /// `ab = true` without a baseline to compare with.
    #[error(
        "ab = true needs a baseline marked at this step or before (baseline = true) and settings that differ from it"
    )]
    AbWithoutBaseline,
    /// Its `wait`.
    #[error("wait: {0}; or \"key\"")]
    Wait(#[source] crate::settings::DurationError),
}

/// What is wrong with a demo's headline metrics ([`DemoError::Headline`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeadlineProblem {
    /// A name that is no metric.
    #[error(
        "{:?} is not a metric; allowed: {}",
        crate::sys::printable(name, false),
        Headline::ALL.iter().map(|h| h.name()).collect::<Vec<_>>().join(", ")
    )]
    NotAMetric {
        /// The name as written.
        name: String,
    },
    /// A metric named twice.
    #[error("{name} is named twice")]
    Twice {
        /// The name as written.
        name: String,
    },
    /// More than fit the screen.
    #[error("{count} metrics; at most {} fit the screen", Headline::MAX)]
    TooMany {
        /// How many.
        count: usize,
    },
}

fn wait_of(s: Option<&str>) -> Result<Wait, StepProblem> {
    match s.map(str::trim) {
        None | Some("key") => Ok(Wait::Key),
        Some(d) => crate::settings::parse_duration_in(d, MIN_WAIT, MAX_WAIT)
            .map(Wait::For)
            .map_err(StepProblem::Wait),
    }
}

impl Demo {
    /// Reads and validates a script: every preset exists and every step's
    /// settings are valid on this machine, before anything runs.
    pub fn from_toml_str(src: &str, origin: &str, cpus: usize) -> Result<Demo, DemoError> {
        let raw = parse_script(src, origin)?;
        let start = match &raw.preset {
            Some(p) => preset_settings(p).map_err(|e| DemoError::Preset {
                origin: origin.to_string(),
                source: Box::new(e),
            })?,
            None => Settings::default(),
        };
        let steps = steps_of(&raw.steps, &start, origin, cpus)?;
        if steps.is_empty() {
            return Err(DemoError::NoSteps {
                origin: origin.to_string(),
            });
        }
        let headline = headlines_of(&raw.headline).map_err(|problem| DemoError::Headline {
            origin: origin.to_string(),
            problem,
        })?;
        Ok(Demo {
            name: crate::sys::printable(&raw.name, false),
            description: crate::sys::printable(&raw.description, true),
            start,
            preset: raw.preset,
            steps,
            headline,
        })
    }
}

/// Parses a demo script's TOML (errors name the line and column) and refuses a newer version.
fn parse_script(src: &str, origin: &str) -> Result<RawScript, DemoError> {
    let raw: RawScript = toml::from_str(src).map_err(|e| DemoError::Parse {
        origin: origin.to_string(),
        at: e.span().map(|r| crate::settings::line_col(src, r.start)),
        message: e.message().replace('\n', "; "),
    })?;
    if raw.version > DEMO_VERSION {
        return Err(DemoError::Newer {
            origin: origin.to_string(),
            found: raw.version,
        });
    }
    Ok(raw)
}

/// The settings of preset `name`.
fn preset_settings(name: &str) -> Result<Settings, PresetError> {
    crate::scenario::preset::resolve(name).map(|(p, _)| p.settings)
}

/// The steps from `start`: each applies its preset, then its `set` lines, and must validate and fit in memory.
fn steps_of(
    raw_steps: &[RawStep],
    start: &Settings,
    origin: &str,
    cpus: usize,
) -> Result<Vec<Step>, DemoError> {
    let step = |i: usize, problem: StepProblem| DemoError::Step {
        origin: origin.to_string(),
        step: i + 1,
        problem: Box::new(problem),
    };
    let mut current = start.clone();
    let mut baseline: Option<Settings> = None;
    let mut steps = Vec::new();
    for (i, s) in raw_steps.iter().enumerate() {
        if s.baseline {
            baseline = Some(current.clone());
        }
        let mut settings = None;
        if let Some(p) = &s.preset {
            current = preset_settings(p).map_err(|e| step(i, StepProblem::Preset(Box::new(e))))?;
            settings = Some(current.clone());
        }
        for (k, v) in &s.set {
            let text = match v {
                toml::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            current
                .set(k, &text)
                .map_err(|e| step(i, StepProblem::Set(e)))?;
            settings = Some(current.clone());
        }
        current
            .validate(cpus)
            .map_err(StepProblem::Invalid)
            .and_then(|()| crate::engine::memory::check_fits(&current).map_err(StepProblem::Memory))
            .map_err(|e| step(i, e))?;
        if s.ab && baseline.as_ref().is_none_or(|b| *b == current) {
            return Err(step(i, StepProblem::AbWithoutBaseline));
        }
        steps.push(Step {
            settings,
            preset: s.preset.clone(),
            baseline: s.baseline,
            drop_cache: s.drop_cache,
            ab: s.ab,
            caption: s.caption.as_deref().map(|c| crate::sys::printable(c, true)),
            wait: wait_of(s.wait.as_deref()).map_err(|e| step(i, e))?,
        });
    }
    Ok(steps)
}

/// The headline metrics named by the script: known, each once, and no more than fit the screen.
fn headlines_of(names: &[String]) -> Result<Vec<Headline>, HeadlineProblem> {
    let mut headline = Vec::new();
    for name in names {
        let h = Headline::parse(name)
            .ok_or_else(|| HeadlineProblem::NotAMetric { name: name.clone() })?;
        if headline.contains(&h) {
            return Err(HeadlineProblem::Twice { name: name.clone() });
        }
        headline.push(h);
    }
    if headline.len() > Headline::MAX {
        return Err(HeadlineProblem::TooMany {
            count: headline.len(),
        });
    }
    Ok(headline)
}

/// Finds `NAME|FILE`: a path as given, else a shipped demo.
pub fn resolve(spec: &str, cpus: usize) -> Result<Demo, DemoError> {
    if spec.contains('/') || spec.ends_with(".toml") {
        let src =
            crate::files::read_capped(std::path::Path::new(spec), crate::files::MAX_TEXT_INPUT)?;
        return Demo::from_toml_str(&src, spec, cpus);
    }
    match SHIPPED.iter().find(|(n, _)| *n == spec) {
        Some((name, src)) => Demo::from_toml_str(src, &format!("presets/demos/{name}.toml"), cpus),
        None => Err(DemoError::NotFound {
            name: spec.to_string(),
        }),
    }
}

/// A direction a caption claims: "Watch run_delay fall" or "queue p99
/// -57%" outside a clause about the published result.
#[cfg(any(test, feature = "testing"))]
#[derive(Debug, Clone, PartialEq)]
pub struct Claim {
    /// The metric it is about (a name in [`crate::metrics::METRICS`]), if
    /// the clause names one.
    pub metric: Option<&'static str>,
    /// The claimed direction: -1 lower, +1 higher, 0 unsaid (a figure
    /// without a sign).
    pub sign: i8,
    /// The clause, as written.
    pub clause: String,
}

/// The directions `caption` claims about this run: clauses (split at ". "
/// and "; ") with a direction word (fall, rise, drop, lower, faster...) or
/// a percentage, except those about the published result (naming
/// "published"). Every such claim must be shown by the run it captions
/// (tests hold each shipped demo's recording to it).
#[cfg(any(test, feature = "testing"))]
pub fn claims(caption: &str) -> Vec<Claim> {
    const DOWN: &[&str] = &[
        "fall",
        "falls",
        "drop",
        "drops",
        "lower",
        "decrease",
        "decreases",
        "shrinks",
    ];
    const UP: &[&str] = &[
        "rise",
        "rises",
        "grow",
        "grows",
        "higher",
        "increase",
        "increases",
    ];
    let metrics: [(&str, &str); 7] = [
        ("run_delay", "run_delay_ms_per_s"),
        ("queue p99", "queue_p99_us"),
        ("p99", "p99_us"),
        ("throughput", "throughput_mib_s"),
        ("iops", "iops"),
        ("p50", "p50_us"),
        ("latency", "p50_us"),
    ];
    let mut out = Vec::new();
    for clause in caption.split(". ").flat_map(|c| c.split("; ")) {
        let lc = clause.to_lowercase();
        if lc.contains("published") {
            continue;
        }
        let words: Vec<String> = lc
            .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '%' || c == '+' || c == '-'))
            .filter(|w| !w.is_empty())
            .map(str::to_string)
            .collect();
        // The claim's word (or figure), and the metric named nearest
        // before it (else the first after it).
        let mut found: Option<(i8, &str)> = None;
        for w in &words {
            let s = if DOWN.contains(&w.as_str()) {
                Some(-1)
            } else if UP.contains(&w.as_str()) {
                Some(1)
            } else if ["faster", "better", "slower", "worse"].contains(&w.as_str()) {
                Some(2)
            } else if w.ends_with('%') && w.chars().any(|c| c.is_ascii_digit()) {
                Some(if w.starts_with('-') {
                    -1
                } else if w.starts_with('+') {
                    1
                } else {
                    0
                })
            } else {
                None
            };
            if let Some(s) = s {
                found = Some((s, w.as_str()));
                break;
            }
        }
        let Some((raw, word)) = found else { continue };
        let at = lc.find(word).unwrap_or(0);
        let mentions = |w: &str| -> Vec<usize> {
            lc.match_indices(w)
                .map(|(i, _)| i)
                .filter(|&i| !(w == "p99" && lc[..i].ends_with("queue ")))
                .collect()
        };
        // Every metric named before it in the clause (else the first one
        // after it).
        let mut named: Vec<(usize, &'static str)> = metrics
            .iter()
            .filter_map(|(w, m)| {
                mentions(w)
                    .into_iter()
                    .filter(|&i| i < at)
                    .max()
                    .map(|i| (i, *m))
            })
            .collect();
        if named.is_empty() {
            named.extend(
                metrics
                    .iter()
                    .filter_map(|(w, m)| {
                        mentions(w).into_iter().find(|&i| i >= at).map(|i| (i, *m))
                    })
                    .min_by_key(|(i, _)| *i),
            );
        }
        named.sort_unstable();
        let targets: Vec<Option<&'static str>> = if named.is_empty() {
            vec![None]
        } else {
            named.into_iter().map(|(_, m)| Some(m)).collect()
        };
        for metric in targets {
            let lower_better = metric
                .and_then(crate::metrics::table::metric)
                .is_some_and(|m| m.better == crate::metrics::table::Better::Lower);
            let sign = match (raw, word) {
                (2, "faster" | "better") => {
                    if lower_better {
                        -1
                    } else {
                        1
                    }
                }
                (2, _) => {
                    if lower_better {
                        1
                    } else {
                        -1
                    }
                }
                (s, _) => s,
            };
            out.push(Claim {
                metric,
                sign,
                clause: clause.trim().to_string(),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shipped_demo_validates() {
        for (name, _) in SHIPPED {
            let d = resolve(name, 2).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(d.name, *name);
            assert!(
                d.steps.iter().any(|s| s.baseline),
                "{name} marks a baseline"
            );
            assert!(
                d.steps.iter().any(|s| s.settings.is_some()),
                "{name} changes something"
            );
            assert!(
                d.steps.iter().all(|s| s.caption.is_some()),
                "{name}: every step has a caption"
            );
        }
    }

    #[test]
    fn captions_name_only_what_the_presentation_screen_shows() {
        // At 80x24 presentation mode shows the header, the demo's headline
        // numbers, "vs baseline", the caption band and the latency chart
        // (p50, p99, p99.9): a caption may point at nothing else.
        for (name, _) in SHIPPED {
            let d = resolve(name, 2).unwrap();
            assert!(!d.headline.is_empty(), "{name} names its headline metrics");
            let shown = |h: Headline| d.headline.contains(&h);
            for c in d.steps.iter().filter_map(|s| s.caption.as_deref()) {
                let lc = c.to_lowercase();
                for panel in [
                    "panel",
                    "stages",
                    "events",
                    "histogram",
                    "settings",
                    "footer",
                ] {
                    assert!(!lc.contains(panel), "{name}: {c:?} mentions the {panel}");
                }
                for (word, h) in [
                    ("run_delay", Headline::RunDelay),
                    ("queue p99", Headline::QueueP99),
                    ("throughput", Headline::Throughput),
                    ("iops", Headline::Iops),
                ] {
                    assert!(
                        !lc.contains(word) || shown(h),
                        "{name}: {c:?} mentions {word}, not among its headline numbers"
                    );
                }
            }
        }
    }

    #[test]
    fn captions_claim_directions_only_where_a_run_can_show_them() {
        // The captions of the last round claimed what the screen did not
        // show: each is found.
        let c = claims(
            "BOUND (v6.3, f959325e6ac3): the work stays on the CPU that completed the bio. Watch run_delay and queue p99 fall (Android: -96%).",
        );
        assert_eq!(c.len(), 2, "{c:?}");
        assert_eq!((c[0].metric, c[0].sign), (Some("run_delay_ms_per_s"), -1));
        assert_eq!((c[1].metric, c[1].sign), (Some("queue_p99_us"), -1));
        let c = claims(
            "A 2-vCPU VM showed queue p99 -57% (878 -> 378 us), run_delay within noise: bound pools wake more workers. n ends; q twice quits.",
        );
        assert_eq!((c[0].metric, c[0].sign), (Some("queue_p99_us"), -1));
        let c = claims("UNBOUND: any idle CPU decrypts. Watch throughput rise.");
        assert_eq!((c[0].metric, c[0].sign), (Some("throughput_mib_s"), 1));
        // A published figure is not a claim about this run.
        assert!(claims("Watch run_delay; published on Android: run_delay -96%.").is_empty());
        assert!(
            claims("Watch IOPS; published: QD1 20-40% slower where cpuidle boosts.").is_empty()
        );
        // Slower IOPS is lower IOPS; slower latency is higher latency.
        assert_eq!(claims("IOPS get slower")[0].sign, -1);
        assert_eq!(claims("latency gets slower")[0].sign, 1);
        // The shipped demos claim nothing of their own, and carry no key
        // instructions (a caption is recorded and becomes a slide's
        // footnote: the explorer's footer says the keys).
        for (name, _) in SHIPPED {
            let d = resolve(name, 2).unwrap();
            for cap in d.steps.iter().filter_map(|s| s.caption.as_deref()) {
                let low = cap.to_lowercase();
                for keyish in ["press ", " n ends", "q twice", "space goes", "(n)", "hit n"] {
                    assert!(!low.contains(keyish), "{name}: {cap:?} gives keys");
                }
                assert!(
                    claims(cap).is_empty(),
                    "{name}: {cap:?} claims {:?}",
                    claims(cap)
                );
            }
        }
    }

    #[test]
    fn headlines_are_checked_and_the_length_counts_key_steps() {
        let d = Demo::from_toml_str(
            "version = 1\nname = \"x\"\nheadline = [\"iops\", \"p50\"]\n[[step]]\nwait = \"12s\"\n[[step]]\nwait = \"key\"\n",
            "d.toml",
            2,
        )
        .unwrap();
        assert_eq!(d.headline, [Headline::Iops, Headline::P50]);
        assert_eq!(d.length(), Duration::from_secs(22));
        let e = Demo::from_toml_str(
            "version = 1\nname = \"x\"\nheadline = [\"latency\"]\n[[step]]\n",
            "d.toml",
            2,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("headline: \"latency\"") && e.contains("throughput, iops, p50"),
            "{e}"
        );
        let e = Demo::from_toml_str(
            "version = 1\nname = \"x\"\nheadline = [\"p50\", \"p99\", \"iops\", \"throughput\"]\n[[step]]\n",
            "d.toml",
            2,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("at most 3"), "{e}");
    }

    #[test]
    fn bad_scripts_are_refused_with_where_and_why() {
        let e = Demo::from_toml_str(
            "version = 1\nname = \"x\"\n[[step]]\nset = { \"workers.mode\" = \"sideways\" }\n",
            "d.toml",
            2,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("d.toml: step 1: set:") && e.contains("inline, bound, unbound"),
            "{e}"
        );
        let e = Demo::from_toml_str(
            "version = 1\nname = \"x\"\n[[step]]\nwiat = \"1s\"\n",
            "d.toml",
            2,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("d.toml:4:1") && e.contains("wiat"), "{e}");
        let e = Demo::from_toml_str("version = 9\nname = \"x\"\n[[step]]\n", "d.toml", 2)
            .unwrap_err()
            .to_string();
        assert!(e.contains("newer"), "{e}");
        let e = Demo::from_toml_str(
            "version = 1\nname = \"x\"\n[[step]]\nwait = \"soon\"\n",
            "d.toml",
            2,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("step 1: wait"), "{e}");
    }

    /// `ab = true` needs a baseline marked at that step or before and
    /// settings that differ from it; it is then carried to the step.
    #[test]
    fn an_ab_step_needs_a_baseline_and_a_difference() {
        let ok = Demo::from_toml_str(
            "version = 1\nname = \"x\"\n[[step]]\nwait = \"1s\"\n[[step]]\nbaseline = true\nset = { \"workers.mode\" = \"bound\" }\nab = true\n",
            "d.toml",
            2,
        )
        .unwrap();
        assert!(ok.steps[1].ab && !ok.steps[0].ab);
        for script in [
            "version = 1\nname = \"x\"\n[[step]]\nset = { \"workers.mode\" = \"bound\" }\nab = true\n",
            "version = 1\nname = \"x\"\n[[step]]\nbaseline = true\nab = true\n",
        ] {
            let e = Demo::from_toml_str(script, "d.toml", 2)
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("d.toml: step 1: ab = true needs a baseline"),
                "{e}"
            );
        }
    }
}
