//! Scripted demos: a TOML list of steps a talk walks through (apply
//! settings or a preset, mark the baseline, show a caption), each advanced
//! after a time or by a key, played in the explorer on a live engine. One
//! script per kernel experiment ships in `presets/demos/` and in the binary.
//!
//! ```toml
//! version = 1
//! name = "fsverity-bound-vs-unbound"
//! preset = "fsverity-bound-vs-unbound"   # where the workload starts
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
//! wait = "key"
//! ```

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use crate::settings::Settings;

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
    #[serde(rename = "step", default)]
    steps: Vec<RawStep>,
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
}

/// Shortest timed step.
const MIN_WAIT: Duration = Duration::from_millis(100);
/// Longest timed step (a talk is shorter; "key" waits for ever).
const MAX_WAIT: Duration = Duration::from_secs(86_400);

fn wait_of(s: Option<&str>, origin: &str, i: usize) -> Result<Wait, String> {
    match s.map(str::trim) {
        None | Some("key") => Ok(Wait::Key),
        Some(d) => crate::settings::parse_duration_in(d, MIN_WAIT, MAX_WAIT)
            .map(Wait::For)
            .map_err(|e| format!("{origin}: step {}: wait: {e}; or \"key\"", i + 1)),
    }
}

impl Demo {
    /// Reads and validates a script: every preset exists and every step's
    /// settings are valid on this machine, before anything runs.
    pub fn from_toml_str(src: &str, origin: &str, cpus: usize) -> Result<Demo, String> {
        let raw: RawScript = toml::from_str(src).map_err(|e| {
            let at = e
                .span()
                .map(|r| {
                    let (l, c) = crate::settings::line_col(src, r.start);
                    format!(":{l}:{c}")
                })
                .unwrap_or_default();
            format!("{origin}{at}: {}", e.message().replace('\n', "; "))
        })?;
        if raw.version > DEMO_VERSION {
            return Err(format!(
                "{origin}: version {}",
                crate::output::file::newer_version("demo script", raw.version, DEMO_VERSION)
            ));
        }
        let preset_settings = |name: &str, i: Option<usize>| {
            crate::scenario::preset::resolve(name)
                .map(|(p, _)| p.settings)
                .map_err(|e| match i {
                    Some(i) => format!("{origin}: step {}: {e}", i + 1),
                    None => format!("{origin}: preset: {e}"),
                })
        };
        let start = match &raw.preset {
            Some(p) => preset_settings(p, None)?,
            None => Settings::default(),
        };
        let mut current = start.clone();
        let mut steps = Vec::new();
        for (i, s) in raw.steps.iter().enumerate() {
            let mut settings = None;
            if let Some(p) = &s.preset {
                current = preset_settings(p, Some(i))?;
                settings = Some(current.clone());
            }
            for (k, v) in &s.set {
                let text = match v {
                    toml::Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                current
                    .set(k, &text)
                    .map_err(|e| format!("{origin}: step {}: set: {e}", i + 1))?;
                settings = Some(current.clone());
            }
            current
                .validate(cpus)
                .map_err(|e| e.to_string())
                .and_then(|()| crate::engine::memory::check_fits(&current))
                .map_err(|e| format!("{origin}: step {}: {e}", i + 1))?;
            steps.push(Step {
                settings,
                preset: s.preset.clone(),
                baseline: s.baseline,
                drop_cache: s.drop_cache,
                caption: s
                    .caption
                    .as_deref()
                    .map(|c| crate::output::format::printable(c, true)),
                wait: wait_of(s.wait.as_deref(), origin, i)?,
            });
        }
        if steps.is_empty() {
            return Err(format!("{origin}: no [[step]]: a demo needs at least one"));
        }
        Ok(Demo {
            name: crate::output::format::printable(&raw.name, false),
            description: crate::output::format::printable(&raw.description, true),
            start,
            preset: raw.preset,
            steps,
        })
    }
}

/// Finds `NAME|FILE`: a path as given, else a shipped demo.
pub fn resolve(spec: &str, cpus: usize) -> Result<Demo, String> {
    if spec.contains('/') || spec.ends_with(".toml") {
        let src = crate::output::file::read_capped(
            std::path::Path::new(spec),
            crate::output::file::MAX_TEXT_INPUT,
        )?;
        return Demo::from_toml_str(&src, spec, cpus);
    }
    match SHIPPED.iter().find(|(n, _)| *n == spec) {
        Some((name, src)) => Demo::from_toml_str(src, &format!("presets/demos/{name}.toml"), cpus),
        None => Err(format!(
            "no demo named {spec:?}: the demos are {} (or give a path to a .toml file)",
            SHIPPED
                .iter()
                .map(|(n, _)| *n)
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
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
    fn bad_scripts_are_refused_with_where_and_why() {
        let e = Demo::from_toml_str(
            "version = 1\nname = \"x\"\n[[step]]\nset = { \"workers.mode\" = \"sideways\" }\n",
            "d.toml",
            2,
        )
        .unwrap_err();
        assert!(
            e.contains("d.toml: step 1: set:") && e.contains("inline, bound, unbound"),
            "{e}"
        );
        let e = Demo::from_toml_str(
            "version = 1\nname = \"x\"\n[[step]]\nwiat = \"1s\"\n",
            "d.toml",
            2,
        )
        .unwrap_err();
        assert!(e.contains("d.toml:4:1") && e.contains("wiat"), "{e}");
        let e =
            Demo::from_toml_str("version = 9\nname = \"x\"\n[[step]]\n", "d.toml", 2).unwrap_err();
        assert!(e.contains("newer"), "{e}");
        let e = Demo::from_toml_str(
            "version = 1\nname = \"x\"\n[[step]]\nwait = \"soon\"\n",
            "d.toml",
            2,
        )
        .unwrap_err();
        assert!(e.contains("step 1: wait"), "{e}");
    }
}
