//! `readpath sweep`: a preset's A/B (`compare`) at every point of a grid of
//! one or two other settings (`--across workload.cpus=1,2 --across
//! load.hogs=0,1,2`), so the answer to a seed is a map, not one number: on
//! which machines, under which load and at which cipher speed it has the
//! published sign, and where it flips.
//!
//! Every run is interleaved as `compare`'s are, and wider: each round runs
//! every point's A and B before the next round starts (round 1: point 1 A
//! B, point 2 A B, ...; round 2 again), so a drift of the machine falls on
//! every cell alike; after each switch `warmup` of records is dropped.
//! Each cell is the change of one metric from A to B with the verdict of
//! [`crate::output::verdict`] (ranges apart or not, the published sign).

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::engine::workload::Workload;
use crate::engine::{Engine, EngineError};
use crate::metrics::{METRICS, Metric, Spread};
use crate::output::agreement::{AxisRef, PointRef};
use crate::output::experiment::{
    CompareOptions, Conditions, Tally, VariantResult, measure, run_label, stopped, variant_results,
};
use crate::output::format::short_key;
use crate::output::verdict::{Kind, Verdict};
use crate::scenario::preset::{Compare, Published};
use crate::settings::{Settings, SettingsError};

/// Version of the sweep report's JSON.
pub const SWEEP_VERSION: u32 = 1;

/// The most points a sweep runs (each is two runs per round).
pub const MAX_POINTS: usize = 64;

/// One axis of the grid: a setting and its values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Axis {
    /// `section.key`.
    pub key: String,
    /// Its values, as `--set` takes them.
    pub values: Vec<String>,
}

impl Axis {
    /// Parses `KEY=V1,V2,...` (`--across`); a value holding a comma (a CPU
    /// list) is written with `;` between the values instead
    /// (`workload.cpus=0-1;2-3`).
    pub fn parse(spec: &str) -> Result<Axis, AxisError> {
        let (key, values) = spec.split_once('=').ok_or_else(|| AxisError::NoValues {
            spec: spec.to_string(),
        })?;
        let key = key.trim();
        let sep = if values.contains(';') { ';' } else { ',' };
        let values: Vec<String> = values.split(sep).map(|v| v.trim().to_string()).collect();
        if values.is_empty() || values.iter().any(String::is_empty) {
            return Err(AxisError::EmptyValue {
                spec: spec.to_string(),
                key: key.to_string(),
            });
        }
        let mut probe = Settings::default();
        for v in &values {
            probe.set(key, v).map_err(AxisError::Value)?;
        }
        Ok(Axis {
            key: key.to_string(),
            values,
        })
    }
}

/// Why an `--across KEY=V1,V2,...` was refused: the spec, or the setting's
/// own error for a key or a value.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AxisError {
    /// No `=`.
    #[error("--across {spec:?}: expected KEY=V1,V2[,V3...]")]
    NoValues {
        /// The spec as written.
        spec: String,
    },
    /// An empty value.
    #[error("--across {spec:?}: give one or more values, comma-separated (e.g. {key}=1,2,4)")]
    EmptyValue {
        /// The spec as written.
        spec: String,
        /// The key.
        key: String,
    },
    /// A key that is not a setting, or a value it does not take.
    #[error("--across: {0}")]
    Value(#[source] SettingsError),
}

/// One of `axes` is `workload.target` with both the model and the kernel:
/// the sweep holds one against the other ([`SweepReport::agreement`]).
pub fn model_and_kernel(axes: &[Axis]) -> bool {
    crate::output::agreement::of_axes(&axis_refs(axes))
}

/// `axes` as [`crate::output::agreement`] takes them.
fn axis_refs(axes: &[Axis]) -> Vec<AxisRef<'_>> {
    axes.iter()
        .map(|a| (a.key.as_str(), a.values.as_slice()))
        .collect()
}

/// The grid's points, first axis slowest: each a list of (key, value).
pub fn points(axes: &[Axis]) -> Vec<Vec<(String, String)>> {
    let mut out: Vec<Vec<(String, String)>> = vec![Vec::new()];
    for a in axes {
        out = out
            .into_iter()
            .flat_map(|p| {
                a.values.iter().map(move |v| {
                    let mut q = p.clone();
                    q.push((a.key.clone(), v.clone()));
                    q
                })
            })
            .collect();
    }
    out
}

/// `base` at point `at`.
pub fn at_point(base: &Settings, at: &[(String, String)]) -> Result<Settings, SettingsError> {
    let mut s = base.clone();
    for (k, v) in at {
        s.set(k, v)?;
    }
    Ok(s)
}

/// Settings whose value decides which published result applies: the
/// fscrypt change measured +25..35% on software AES and ~0% with AES-NI,
/// so a point on another cipher is judged by the shipped preset that
/// states that cipher's result, or by none.
pub const CONDITION_KEYS: &[&str] = &[crate::key!(pipeline.cipher).name()];

/// The published result that applies at point `at` of a sweep of
/// `compare` from `base` (whose own is `published`): `published`, unless
/// the point moves a [`CONDITION_KEYS`] setting; then the shipped preset
/// with the same comparison and that setting's value states it, or none
/// does.
pub fn published_at(
    base: &Settings,
    published: Option<&Published>,
    compare: &Compare,
    at: &[(String, String)],
) -> Option<Published> {
    let moved: Vec<&(String, String)> = at
        .iter()
        .filter(|(k, v)| {
            CONDITION_KEYS.contains(&k.as_str()) && {
                let mut s = base.clone();
                s.set(k, v).is_ok() && s.get(k) != base.get(k)
            }
        })
        .collect();
    let metric = &published?.metric;
    if moved.is_empty() {
        return published.cloned();
    }
    crate::scenario::preset::SHIPPED
        .iter()
        .find_map(|(name, _)| {
            let p = crate::scenario::preset::shipped(name)?;
            let c = p.compare.as_ref()?;
            let pb = p.published.as_ref()?;
            let same = c.key == compare.key
                && c.values.get(..2) == compare.values.get(..2)
                && pb.metric == *metric
                && moved.iter().all(|(k, v)| {
                    let mut s = Settings::default();
                    s.set(k, v).is_ok() && p.settings.get(k) == s.get(k)
                });
            same.then(|| pb.clone())
        })
}

/// One point of the grid.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepPoint {
    /// Where: (key, value) per axis.
    pub at: Vec<(String, String)>,
    /// The published result this point is judged by (see
    /// [`published_at`]), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub published: Option<Published>,
    /// A and B (and any further values of the compared setting) there.
    pub variants: Vec<VariantResult>,
    /// The verdict on the chosen metric, A -> B.
    pub verdict: Verdict,
    /// Notices raised at this point (a fallback, a refused privilege).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notices: Vec<String>,
}

/// A whole sweep.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepReport {
    /// Always "sweep" (what `plot` and `replay` tell it by).
    pub kind: String,
    /// [`SWEEP_VERSION`].
    pub version: u32,
    /// The preset's name, if one was used.
    pub preset: Option<String>,
    /// The compared setting and its values (A, B).
    pub compare: Compare,
    /// The grid's axes (one or two).
    pub across: Vec<Axis>,
    /// The metric each cell shows (a name in [`METRICS`]).
    pub metric: String,
    /// Rounds run.
    pub rounds: u32,
    /// Measured seconds per run.
    pub duration_s: f64,
    /// Dropped seconds after each switch.
    pub warmup_s: f64,
    /// Wall time of the whole sweep, s.
    pub elapsed_s: f64,
    /// The settings every point starts from.
    pub settings: Settings,
    /// The points, first axis slowest.
    pub points: Vec<SweepPoint>,
    /// The published result the preset reproduces, when the comparison is
    /// its own and the metric its.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub published: Option<Published>,
    /// The notices raised at every point, the machine and why the sweep
    /// ended early, if it did.
    #[serde(flatten)]
    pub ran: Conditions,
    /// Where an axis is `workload.target` with the model and the kernel:
    /// the model's answer against the kernel's on each headline metric
    /// (computed from `points`; for readers of the JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agreement: Option<crate::output::agreement::Agreement>,
}

/// What to sweep.
pub struct SweepPlan<'a> {
    /// The settings every point starts from.
    pub base: &'a Settings,
    /// A against B.
    pub compare: &'a Compare,
    /// The grid.
    pub across: &'a [Axis],
    /// The metric each cell shows.
    pub metric: &'static Metric,
    /// The preset's name.
    pub preset: Option<String>,
    /// The published result, when it applies.
    pub published: Option<Published>,
}

/// A grid point: each axis's (key, value).
pub type Point = Vec<(String, String)>;

/// The grid's points and, for each, its variants' settings (A, B), in
/// the order they run.
pub fn grid_runs(plan: &SweepPlan<'_>) -> Result<(Vec<Point>, Vec<Vec<Settings>>), EngineError> {
    let grid = points(plan.across);
    let mut runs: Vec<Vec<Settings>> = Vec::new();
    for at in &grid {
        let s = at_point(plan.base, at).map_err(|e| EngineError::Output(e.to_string()))?;
        runs.push(plan.compare.variants(&s)?);
    }
    Ok((grid, runs))
}

/// Runs the sweep; `progress` hears (round, point, variant) before each
/// run.
pub fn run(
    plan: &SweepPlan<'_>,
    opts: &CompareOptions,
    progress: &mut dyn FnMut(u32, usize, usize),
    dataset_progress: crate::dataset::Progress<'_>,
) -> Result<SweepReport, EngineError> {
    let (grid, runs) = grid_runs(plan)?;
    let started = Instant::now();
    let mut engine = Engine::start(runs[0][0].clone(), opts.engine.clone(), dataset_progress)?;
    let out = run_on(&mut engine, plan, &grid, &runs, opts, progress);
    let _ = engine.stop_with_records();
    let mut report = out?;
    report.elapsed_s = started.elapsed().as_secs_f64();
    Ok(report)
}

/// [`run`] on a workload already started: a remote agent, a lab guest
/// (every point's A and B in one boot of it; on a kernel with readpath's
/// lab switches the kernel's queues flipped between them).
pub fn run_with(
    engine: &mut dyn Workload,
    plan: &SweepPlan<'_>,
    opts: &CompareOptions,
    progress: &mut dyn FnMut(u32, usize, usize),
) -> Result<SweepReport, EngineError> {
    let (grid, runs) = grid_runs(plan)?;
    let started = Instant::now();
    let mut report = run_on(engine, plan, &grid, &runs, opts, progress)?;
    report.elapsed_s = started.elapsed().as_secs_f64();
    Ok(report)
}

fn run_on(
    engine: &mut dyn Workload,
    plan: &SweepPlan<'_>,
    grid: &[Vec<(String, String)>],
    runs: &[Vec<Settings>],
    opts: &CompareOptions,
    progress: &mut dyn FnMut(u32, usize, usize),
) -> Result<SweepReport, EngineError> {
    let stop = &opts.stop;
    let nv = plan.compare.values.len();
    let mut tallies: Vec<Tally> = (0..grid.len()).map(|_| Tally::new(nv)).collect();
    let mut interrupted = None;
    let total = opts.rounds as usize * grid.len() * nv;
    let mut outputs = super::experiment::Outputs::default();
    'rounds: for round in 0..opts.rounds {
        for (p, variants) in runs.iter().enumerate() {
            for (i, v) in variants.iter().enumerate() {
                let done = (round as usize * grid.len() + p) * nv + i;
                if stop() {
                    interrupted = Some(stopped(&format!("after {done} of {total} runs")));
                    break 'rounds;
                }
                progress(round, p, i);
                engine.apply(v.clone())?;
                let (recs, n) = measure(engine, opts.warmup, opts.duration, &mut outputs, stop);
                if stop() {
                    interrupted = Some(stopped(&format!("during run {} of {total}", done + 1)));
                    break 'rounds;
                }
                let at: Vec<String> = grid[p].iter().map(|(k, v)| format!("{k}={v}")).collect();
                let what = format!("{} at {}", run_label(round, plan.compare, i), at.join(" "));
                tallies[p].add(i, &what, &recs, n);
            }
        }
    }
    let metric = plan.metric;
    let rounds_done = |t: &Tally| t.per_variant.iter().map(Vec::len).min().unwrap_or(0) as u32;
    let published = plan.published.clone().filter(|p| p.metric == metric.name);
    let mut all_notices: Option<Vec<String>> = None;
    let points: Vec<SweepPoint> = grid
        .iter()
        .zip(tallies)
        .map(|(at, t)| {
            let rounds = rounds_done(&t);
            let variants = variant_results(plan.compare, t.per_variant, &t.failed);
            let here = published_at(plan.base, published.as_ref(), plan.compare, at);
            let verdict = cell_verdict(&variants, metric, rounds, here.as_ref());
            all_notices = Some(match all_notices.take() {
                None => t.notices.clone(),
                Some(common) => common
                    .into_iter()
                    .filter(|n| t.notices.contains(n))
                    .collect(),
            });
            SweepPoint {
                at: at.clone(),
                published: here,
                variants,
                verdict,
                notices: t.notices,
            }
        })
        .collect();
    // A notice every point raised is said once, for the sweep.
    let common = all_notices.unwrap_or_default();
    let points = points
        .into_iter()
        .map(|mut p| {
            p.notices.retain(|n| !common.contains(n));
            p
        })
        .collect();
    let mut report = SweepReport {
        kind: "sweep".into(),
        version: SWEEP_VERSION,
        preset: plan.preset.clone(),
        compare: plan.compare.clone(),
        across: plan.across.to_vec(),
        metric: metric.name.into(),
        rounds: opts.rounds,
        duration_s: opts.duration.as_secs_f64(),
        warmup_s: opts.warmup.as_secs_f64(),
        elapsed_s: 0.0,
        settings: plan.base.clone(),
        points,
        published,
        ran: Conditions {
            notices: common,
            machine: engine.machine(),
            features: engine.features().clone(),
            interrupted,
        },
        agreement: None,
    };
    report.agreement = report.agreement();
    Ok(report)
}

/// The verdict on `metric` from the first variant to the second.
fn cell_verdict(
    variants: &[VariantResult],
    metric: &Metric,
    rounds: u32,
    published: Option<&Published>,
) -> Verdict {
    crate::output::experiment::verdict_between(
        variants.first(),
        variants.get(1),
        metric.name,
        rounds,
        published,
    )
}

/// A cell of the grid as text: `-68% ✓` (ranges apart, the published
/// sign), `+39% ✗` (apart, the other way), `?-68%` (apart, but at a
/// chance by noise of 5% or more: a hint), `~+3%` (ranges overlap), `+5%`
/// (apart, nothing published, or one round), `-` (not measured).
pub fn cell_text(v: &Verdict) -> String {
    let Some(c) = v.change_pct else {
        return "-".into();
    };
    match v.kind {
        Kind::Reproduced if v.overlap => format!("~{c:+.0}% ✓"),
        Kind::Reproduced => format!("{c:+.0}% ✓"),
        Kind::NotReproduced => format!("{c:+.0}% ✗"),
        Kind::Hint => format!("?{c:+.0}%"),
        Kind::Noise => format!("~{c:+.0}%"),
        Kind::Apart | Kind::NoSpread => format!("{c:+.0}%"),
        Kind::NotMeasured => "-".into(),
    }
}

impl SweepReport {
    /// What the marks of the grid's cells say, one line (`?` only where a
    /// cell has it).
    pub fn legend(&self) -> String {
        let mut l = String::new();
        if self.published.is_some() {
            l.push_str("✓ the published sign, ✗ the opposite (ranges apart); ");
        }
        if self.points.iter().any(|p| p.verdict.kind == Kind::Hint) {
            l.push_str(
                "? ranges apart, but too few rounds: noise gives that 5% of the time or more; ",
            );
        }
        l.push_str("~ the rounds' ranges (min-max) overlap: no direction.");
        l
    }

    /// The metric's entry in the table.
    pub fn metric(&self) -> Option<&'static Metric> {
        crate::metrics::table::metric(&self.metric)
    }

    /// The grid's rows and columns: (row labels, column labels, cells by
    /// row then column). One axis: one column.
    pub fn grid(&self) -> (Vec<String>, Vec<String>, Vec<Vec<&SweepPoint>>) {
        let label = |a: &Axis, v: &str| format!("{}={v}", short_key(&a.key));
        let rows: Vec<String> = self.across[0]
            .values
            .iter()
            .map(|v| label(&self.across[0], v))
            .collect();
        let cols: Vec<String> = match self.across.get(1) {
            Some(b) => b.values.iter().map(|v| label(b, v)).collect(),
            None => vec![String::new()],
        };
        let ncols = cols.len();
        let cells = self
            .points
            .chunks(ncols)
            .map(|c| c.iter().collect())
            .collect();
        (rows, cols, cells)
    }

    /// Where the answer has the published sign, where it flips, where it is
    /// noise: one sentence each, computed from the cells.
    pub fn summary(&self) -> Vec<String> {
        // A point's name has no space, so a wrapped line never splits it.
        let name = |p: &SweepPoint| {
            p.at.iter()
                .map(|(k, v)| format!("{}={v}", short_key(k)))
                .collect::<Vec<_>>()
                .join("/")
        };
        let of = |k: &[Kind]| -> Vec<String> {
            self.points
                .iter()
                .filter(|p| k.contains(&p.verdict.kind))
                .map(name)
                .collect()
        };
        let n = self.points.len();
        let mut out = Vec::new();
        let say = |what: &str, list: Vec<String>, out: &mut Vec<String>| {
            if !list.is_empty() {
                out.push(format!(
                    "{what} at {} of {n}: {}",
                    list.len(),
                    list.join(", ")
                ));
            }
        };
        say("the published sign", of(&[Kind::Reproduced]), &mut out);
        say(
            "the opposite sign (ranges apart)",
            of(&[Kind::NotReproduced]),
            &mut out,
        );
        say(
            if self.published.is_some() {
                "a change, no published result for that point (ranges apart)"
            } else {
                "a change (ranges apart)"
            },
            of(&[Kind::Apart]),
            &mut out,
        );
        say(
            "ranges apart, but as noise gives them 5% of the time or more (a hint)",
            of(&[Kind::Hint]),
            &mut out,
        );
        say("within noise", of(&[Kind::Noise]), &mut out);
        say("one round, not judged", of(&[Kind::NoSpread]), &mut out);
        say("not measured", of(&[Kind::NotMeasured]), &mut out);
        if let Some(g) = self.agreement() {
            out.extend(g.summary());
        }
        out
    }

    /// The model against the kernel, metric by metric, where one axis is
    /// `workload.target` with both ([`crate::output::agreement`]).
    pub fn agreement(&self) -> Option<crate::output::agreement::Agreement> {
        let axes = axis_refs(&self.across);
        let points: Vec<PointRef<'_>> = self
            .points
            .iter()
            .map(|p| (p.at.as_slice(), p.variants.as_slice()))
            .collect();
        crate::output::agreement::of(&axes, &points, self.rounds)
    }

    /// The grid and its details, for a terminal.
    pub fn to_text(&self) -> String {
        let m = self.metric();
        let label = m.map_or(self.metric.as_str(), |m| m.label);
        let (a, b) = (
            self.compare.values.first().map_or("", String::as_str),
            self.compare.values.get(1).map_or("", String::as_str),
        );
        let mut out = format!(
            "readpath sweep: {} = {a} -> {b} at {} points ({}) | {} round(s) x {:.0}s per run, interleaved, {:.1}s warm-up | {:.0}s in all{}\n",
            self.compare.key,
            self.points.len(),
            self.across
                .iter()
                .map(|x| format!("{} = {}", x.key, x.values.join(", ")))
                .collect::<Vec<_>>()
                .join(" x "),
            self.rounds,
            self.duration_s,
            self.warmup_s,
            self.elapsed_s,
            self.preset
                .as_ref()
                .map_or(String::new(), |p| format!(" | preset {p}")),
        );
        self.ran.write_heading(&mut out);
        if let Some(p) = &self.published {
            out.push_str(&format!(
                "published ({}): {}: {label} {}\n",
                p.source,
                p.result,
                p.figure()
            ));
        }
        out.push_str(&format!("\nchange of {label}, {a} -> {b}:\n"));
        let (rows, cols, cells) = self.grid();
        let texts: Vec<Vec<String>> = cells
            .iter()
            .map(|r| r.iter().map(|p| cell_text(&p.verdict)).collect())
            .collect();
        let w0 = rows.iter().map(|r| r.chars().count()).max().unwrap_or(0);
        let wc: Vec<usize> = (0..cols.len())
            .map(|c| {
                texts
                    .iter()
                    .filter_map(|r| r.get(c))
                    .map(|t| t.chars().count())
                    .chain(std::iter::once(cols[c].chars().count()))
                    .max()
                    .unwrap_or(4)
                    + 3
            })
            .collect();
        if self.across.len() > 1 {
            let mut line = format!("{:w0$}", "");
            for (c, w) in cols.iter().zip(&wc) {
                line.push_str(&format!("{c:>w$}"));
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        for (r, row) in rows.iter().zip(&texts) {
            let mut line = format!("{r:<w0$}");
            for (t, w) in row.iter().zip(&wc) {
                line.push_str(&format!("{t:>w$}"));
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out.push_str(&self.legend());
        out.push('\n');
        for l in self.summary() {
            out.push_str(&format!("  {l}\n"));
        }
        if let Some(g) = self.agreement() {
            out.push_str(&g.to_text());
        }
        out.push_str(&format!(
            "\neach point, {label} median (min-max) {a} -> {b}:\n"
        ));
        for p in &self.points {
            let spread = |i: usize| {
                p.variants
                    .get(i)
                    .and_then(|v| v.metrics.iter().find(|(n, _)| *n == self.metric))
                    .map(|(_, s)| *s)
            };
            let cell = |s: Option<Spread>| match (s, m) {
                (Some(s), Some(m)) if s.median.is_finite() => format!(
                    "{} ({}-{})",
                    m.cell(s.median).trim(),
                    m.cell(s.min).trim(),
                    m.cell(s.max).trim()
                ),
                _ => "-".into(),
            };
            let at: Vec<String> = p.at.iter().map(|(k, v)| format!("{k}={v}")).collect();
            out.push_str(&format!(
                "  {}: {} -> {}: {}\n",
                at.join(" "),
                cell(spread(0)),
                cell(spread(1)),
                p.verdict.text
            ));
            for n in &p.notices {
                out.push_str(&format!("    notice: {n}\n"));
            }
        }
        for n in &self.ran.notices {
            out.push_str(&format!("notice: {n}\n"));
        }
        out
    }
}

/// A `--metric` that is none of [`METRICS`]: the name and those allowed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "--metric {:?}: allowed {}",
    crate::sys::printable(name, false),
    METRICS.iter().map(|m| m.name).collect::<Vec<_>>().join(", ")
)]
pub struct UnknownMetric {
    /// The name as written.
    pub name: String,
}

/// The metric named `name`, or an error naming those allowed.
pub fn metric_named(name: &str) -> Result<&'static Metric, UnknownMetric> {
    crate::metrics::table::metric(name).ok_or_else(|| UnknownMetric {
        name: name.to_string(),
    })
}

/// Why a sweep report (JSON) was refused.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// Not JSON, or no object.
    #[error("not a sweep report: {0}")]
    NotJson(#[source] serde_json::Error),
    /// No `"kind": "sweep"`.
    #[error("not a sweep report (no \"kind\": \"sweep\")")]
    NotASweep,
    /// Written by a newer readpath.
    #[error(
        "{}",
        crate::files::newer_version("sweep report", found, SWEEP_VERSION)
    )]
    Newer {
        /// Its version.
        found: u32,
    },
    /// More or other than `readpath sweep` writes.
    #[error("a broken sweep report: {0}")]
    Broken(#[from] Broken),
}

/// What is wrong with a sweep report beyond what `readpath sweep` writes
/// ([`ReportError::Broken`]).
#[derive(Debug, thiserror::Error)]
pub enum Broken {
    /// Its JSON does not hold a report's fields.
    #[error("{0}")]
    Json(#[source] serde_json::Error),
    /// Not one or two axes.
    #[error("{axes} axes; a sweep's grid has one or two")]
    Axes {
        /// How many.
        axes: usize,
    },
    /// A grid of no points or more than [`MAX_POINTS`].
    #[error(
        "a grid of {} = {cells} points; `readpath sweep` runs 1..={MAX_POINTS} points, so no report of it has more (refused, not drawn)",
        dims.iter().map(usize::to_string).collect::<Vec<_>>().join("x")
    )]
    Grid {
        /// The values per axis.
        dims: Vec<usize>,
        /// Their product.
        cells: usize,
    },
    /// Not one point per cell.
    #[error("{axes} axes and {points} points for a grid of {cells}")]
    Points {
        /// How many axes.
        axes: usize,
        /// How many points.
        points: usize,
        /// How many cells the axes make.
        cells: usize,
    },
    /// An axis that is no setting, or a value it does not take.
    #[error("across: {0}")]
    Across(#[source] SettingsError),
    /// Rounds out of range.
    #[error("rounds = {rounds}; allowed 1..={MAX_REPORT_ROUNDS}")]
    Rounds {
        /// The rounds it says.
        rounds: u32,
    },
    /// Too many notices, for the sweep (`point` None) or at a point
    /// (1-based).
    #[error(
        "{}{count} notices; at most {MAX_REPORT_NOTICES}",
        point.map_or(String::new(), |p| format!("point {p}: "))
    )]
    Notices {
        /// The point, 1-based, or None for the sweep's own.
        point: Option<usize>,
        /// How many.
        count: usize,
    },
    /// A point of fewer than two or too many variants.
    #[error("point {point}: {count} variants; allowed 2..={MAX_REPORT_VARIANTS}")]
    Variants {
        /// The point, 1-based.
        point: usize,
        /// How many variants.
        count: usize,
    },
    /// A variant with more rounds than the report.
    #[error(
        "point {point}: {rounds} rounds of {key} = {value}, in a report of {report_rounds} rounds"
    )]
    VariantRounds {
        /// The point, 1-based.
        point: usize,
        /// The variant's rounds.
        rounds: usize,
        /// The compared key.
        key: String,
        /// The variant's value.
        value: String,
        /// The report's rounds.
        report_rounds: u32,
    },
}

/// Parses a sweep report (JSON), checking its kind and version.
pub fn parse(text: &str) -> Result<SweepReport, ReportError> {
    #[derive(Deserialize)]
    struct Head {
        kind: Option<String>,
        version: Option<u32>,
        #[serde(default)]
        across: Vec<Axis>,
    }
    let head: Head = serde_json::from_str(text).map_err(ReportError::NotJson)?;
    if head.kind.as_deref() != Some("sweep") {
        return Err(ReportError::NotASweep);
    }
    if let Some(v) = head.version
        && v > SWEEP_VERSION
    {
        return Err(ReportError::Newer { found: v });
    }
    // The grid's size first, before its points are held (a 255x260 grid
    // in 31 MB would take five times that once parsed).
    check_grid(&head.across, None)?;
    let r: SweepReport = serde_json::from_str(text).map_err(Broken::Json)?;
    check_report(&r)?;
    Ok(r)
}

/// Most rounds a report may hold (`--rounds` allows 1..=100).
const MAX_REPORT_ROUNDS: u32 = 100;
/// Most values a compared setting may have in a report (a sweep compares
/// exactly two; compare's `--vary` more).
const MAX_REPORT_VARIANTS: usize = 16;
/// Most notices a report may carry, at a point or for the whole sweep.
const MAX_REPORT_NOTICES: usize = 1000;

/// Checks a report's grid: one or two axes of at most [`MAX_POINTS`]
/// cells in all, and (`points`, once parsed) one point per cell.
fn check_grid(across: &[Axis], points: Option<usize>) -> Result<(), Broken> {
    if across.is_empty() || across.len() > 2 {
        return Err(Broken::Axes { axes: across.len() });
    }
    let cells = across
        .iter()
        .try_fold(1usize, |n, a| n.checked_mul(a.values.len()))
        .unwrap_or(usize::MAX);
    if cells == 0 || cells > MAX_POINTS {
        return Err(Broken::Grid {
            dims: across.iter().map(|a| a.values.len()).collect(),
            cells,
        });
    }
    if let Some(n) = points
        && n != cells
    {
        return Err(Broken::Points {
            axes: across.len(),
            points: n,
            cells,
        });
    }
    Ok(())
}

/// Holds a parsed report to what `readpath sweep` itself can write, so
/// that drawing it (`plot`, `replay`) is bounded whatever the file says: a
/// grid of at most [`MAX_POINTS`] cells of one or two axes, each axis a
/// real setting with values it takes, two to [`MAX_REPORT_VARIANTS`]
/// variants per point, each with at most `rounds` rounds of at most 100.
/// A 581x582 grid made a 131 MB SVG and a 2.57 GB PNG before this.
fn check_report(r: &SweepReport) -> Result<(), Broken> {
    check_grid(&r.across, Some(r.points.len()))?;
    for a in &r.across {
        let mut probe = Settings::default();
        for v in &a.values {
            probe.set(&a.key, v).map_err(Broken::Across)?;
        }
    }
    if !(1..=MAX_REPORT_ROUNDS).contains(&r.rounds) {
        return Err(Broken::Rounds { rounds: r.rounds });
    }
    if r.ran.notices.len() > MAX_REPORT_NOTICES {
        return Err(Broken::Notices {
            point: None,
            count: r.ran.notices.len(),
        });
    }
    for (i, p) in r.points.iter().enumerate() {
        let n = p.variants.len();
        if !(2..=MAX_REPORT_VARIANTS).contains(&n) {
            return Err(Broken::Variants {
                point: i + 1,
                count: n,
            });
        }
        if p.notices.len() > MAX_REPORT_NOTICES {
            return Err(Broken::Notices {
                point: Some(i + 1),
                count: p.notices.len(),
            });
        }
        if let Some(v) = p
            .variants
            .iter()
            .find(|v| v.rounds.len() > r.rounds as usize)
        {
            return Err(Broken::VariantRounds {
                point: i + 1,
                rounds: v.rounds.len(),
                key: r.compare.key.clone(),
                value: v.value.clone(),
                report_rounds: r.rounds,
            });
        }
    }
    Ok(())
}

/// How long a sweep of `points` points will take, roughly: each round
/// runs A and B at every point, `duration + warmup` each, plus the switch.
pub fn estimate(points: usize, variants: usize, opts: &CompareOptions) -> Duration {
    let per = opts.duration + opts.warmup + opts.engine.interval * 2;
    per * (points * variants) as u32 * opts.rounds
}

/// A finished sweep for snapshots and tests (the explorer's sweep view, the heat map): the fs-verity seed
/// over CPUs 1, 2 x hogs 0, 1, all, one cell of each verdict.
#[cfg(any(test, feature = "testing"))]
pub fn fixture() -> SweepReport {
    use crate::metrics::Spread;
    use crate::output::experiment::VariantResult;
    use crate::scenario::preset::{Compare, Published};
    let published = Published {
        source: "f959325e6ac3 (v6.3)".into(),
        metric: "run_delay_ms_per_s".into(),
        change: (-96.0, -96.0),
        result: "553,800 us unbound -> 18,962 us bound".into(),
    };
    let s = |median: f64, w: f64| Spread {
        median,
        min: median - w,
        max: median + w,
        change_pct: None,
    };
    // (cpus, hogs, unbound, bound) run_delay ms/s, spread +-w.
    let cells = [
        ("1", "0", 7.9, 6.4, 0.4),
        ("1", "1", 60.0, 58.0, 5.0),
        ("1", "all", 65.1, 61.9, 4.0),
        ("2", "0", 198.0, 4.9, 3.0),
        ("2", "1", 19.1, 29.6, 1.0),
        ("2", "all", 108.0, 37.4, 6.0),
    ];
    let points = cells
        .iter()
        .map(|&(cpus, hogs, a, b, w)| {
            let variant = |v: &str, x: f64| VariantResult {
                value: v.into(),
                metrics: vec![("run_delay_ms_per_s".into(), s(x, w))],
                rounds: Vec::new(),
                failed_reads: 0,
            };
            SweepPoint {
                at: vec![
                    (crate::key!(workload.cpus).name().into(), cpus.into()),
                    (crate::key!(load.hogs).name().into(), hogs.into()),
                ],
                published: Some(published.clone()),
                variants: vec![variant("unbound", a), variant("bound", b)],
                verdict: crate::output::verdict::against(&s(a, w), &s(b, w), [4, 4], &published),
                notices: Vec::new(),
            }
        })
        .collect();
    SweepReport {
        kind: "sweep".into(),
        version: SWEEP_VERSION,
        preset: Some("fsverity-bound-vs-unbound".into()),
        compare: Compare::of(
            crate::key!(workers.mode).name(),
            vec!["unbound".into(), "bound".into()],
        ),
        across: vec![
            Axis {
                key: crate::key!(workload.cpus).name().into(),
                values: vec!["1".into(), "2".into()],
            },
            Axis {
                key: crate::key!(load.hogs).name().into(),
                values: vec!["0".into(), "1".into(), "all".into()],
            },
        ],
        metric: "run_delay_ms_per_s".into(),
        rounds: 4,
        duration_s: 3.0,
        warmup_s: 1.0,
        elapsed_s: 220.0,
        settings: Settings::default(),
        points,
        published: Some(published),
        ran: Conditions {
            notices: Vec::new(),
            machine: crate::sys::MachineInfo {
                cpu_model: "AMD EPYC".into(),
                cpus: 2,
                kernel: "6.18.44".into(),
                ..Default::default()
            },
            // As the explorer's fixture has them (high priority refused).
            features: crate::sys::testing::fixture_features(),
            interrupted: None,
        },
        agreement: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axes_parse_and_make_a_grid_first_axis_slowest() {
        let a = Axis::parse("workload.cpus=1,2").unwrap();
        assert_eq!(a.values, ["1", "2"]);
        let b = Axis::parse("load.hogs=0,all").unwrap();
        let g = points(&[a, b]);
        assert_eq!(g.len(), 4);
        assert_eq!(
            g[1],
            [
                ("workload.cpus".to_string(), "1".to_string()),
                ("load.hogs".to_string(), "all".to_string())
            ]
        );
        // Lists with commas: `;` between values.
        let c = Axis::parse("workload.cpus=0-1;0,1").unwrap();
        assert_eq!(c.values, ["0-1", "0,1"]);
        let e = Axis::parse("load.hogs=1,x").unwrap_err().to_string();
        assert!(e.starts_with("--across: load.hogs"), "{e}");
        assert!(Axis::parse("load.hogs").is_err());
        assert!(Axis::parse("load.hogs=1,,2").is_err());
        assert!(
            Axis::parse("load.hgs=1")
                .unwrap_err()
                .to_string()
                .contains("load.hogs")
        );
        assert_eq!(short_key("workload.cpus"), "cpus");
        assert_eq!(short_key("load.hogs"), "hogs");
    }

    fn spread(median: f64, min: f64, max: f64) -> Spread {
        Spread {
            median,
            min,
            max,
            change_pct: None,
        }
    }

    fn point(at: &[(&str, &str)], a: Spread, b: Spread, p: Option<&Published>) -> SweepPoint {
        let variant = |v: &str, s: Spread| VariantResult {
            value: v.into(),
            metrics: vec![("run_delay_ms_per_s".into(), s)],
            rounds: Vec::new(),
            failed_reads: 0,
        };
        let variants = vec![variant("unbound", a), variant("bound", b)];
        let verdict = cell_verdict(&variants, &crate::metrics::table::RUN_DELAY, 4, p);
        SweepPoint {
            at: at
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            published: p.cloned(),
            variants,
            verdict,
            notices: Vec::new(),
        }
    }

    #[test]
    fn a_cipher_point_takes_the_published_result_stated_for_that_cipher() {
        let (slow, _) = crate::scenario::preset::resolve("fscrypt-slow-cipher").unwrap();
        let c = slow.compare.clone().unwrap();
        let at = |v: &str| vec![("pipeline.cipher".to_string(), v.to_string())];
        let own = slow.published.as_ref();
        let p = |v: &str| published_at(&slow.settings, own, &c, &at(v)).map(|p| p.figure());
        assert_eq!(p("aes-256-xts-soft").as_deref(), Some("+25..+35%"));
        assert_eq!(p("aes-256-xts").as_deref(), Some("~0% (-2..+2%)"));
        assert_eq!(p("adiantum"), None);
        // Other axes keep the preset's own.
        let hogs = vec![("load.hogs".to_string(), "all".to_string())];
        assert_eq!(
            published_at(&slow.settings, own, &c, &hogs)
                .map(|p| p.figure())
                .as_deref(),
            Some("+25..+35%")
        );
    }

    #[test]
    fn the_grid_marks_sign_flips_and_noise_and_round_trips() {
        let published = Published {
            source: "f959325e6ac3".into(),
            metric: "run_delay_ms_per_s".into(),
            change: (-96.0, -96.0),
            result: "553,800 us -> 18,962 us".into(),
        };
        let p = Some(&published);
        let r = SweepReport {
            kind: "sweep".into(),
            version: SWEEP_VERSION,
            preset: Some("fsverity-bound-vs-unbound".into()),
            compare: Compare::of("workers.mode", vec!["unbound".into(), "bound".into()]),
            across: vec![
                Axis::parse("workload.cpus=1,2").unwrap(),
                Axis::parse("load.hogs=0,2").unwrap(),
            ],
            metric: "run_delay_ms_per_s".into(),
            rounds: 3,
            duration_s: 3.0,
            warmup_s: 1.0,
            elapsed_s: 100.0,
            settings: Settings::default(),
            points: vec![
                point(
                    &[("workload.cpus", "1"), ("load.hogs", "0")],
                    spread(100.0, 90.0, 110.0),
                    spread(32.0, 30.0, 35.0),
                    p,
                ),
                point(
                    &[("workload.cpus", "1"), ("load.hogs", "2")],
                    spread(100.0, 90.0, 110.0),
                    spread(172.0, 160.0, 180.0),
                    p,
                ),
                point(
                    &[("workload.cpus", "2"), ("load.hogs", "0")],
                    spread(100.0, 90.0, 110.0),
                    spread(103.0, 95.0, 112.0),
                    p,
                ),
                point(
                    &[("workload.cpus", "2"), ("load.hogs", "2")],
                    spread(f64::NAN, f64::NAN, f64::NAN),
                    spread(1.0, 1.0, 1.0),
                    p,
                ),
            ],
            published: Some(published.clone()),
            ran: Conditions {
                notices: Vec::new(),
                machine: Default::default(),
                features: Default::default(),
                interrupted: None,
            },
            agreement: None,
        };
        let t = r.to_text();
        let row1 = t.lines().find(|l| l.starts_with("cpus=1")).unwrap();
        assert!(row1.contains("-68% ✓") && row1.contains("+72% ✗"), "{t}");
        let row2 = t.lines().find(|l| l.starts_with("cpus=2")).unwrap();
        assert!(
            row2.contains("~+3%") && row2.trim_end().ends_with('-'),
            "{t}"
        );
        assert!(
            t.contains("the published sign at 1 of 4: cpus=1/hogs=0"),
            "{t}"
        );
        assert!(
            t.contains("the opposite sign (ranges apart) at 1 of 4: cpus=1/hogs=2"),
            "{t}"
        );
        assert!(t.contains("within noise at 1 of 4: cpus=2/hogs=0"), "{t}");
        assert!(!t.contains("?") && !t.contains("a hint"), "{t}");
        // In 3 v 3 rounds the same cells are hints (10% by noise).
        let mut three = r.clone();
        for q in &mut three.points {
            q.verdict = cell_verdict(&q.variants, &crate::metrics::table::RUN_DELAY, 3, p);
        }
        let t3 = three.to_text();
        let row1 = t3.lines().find(|l| l.starts_with("cpus=1")).unwrap();
        assert!(row1.contains("?-68%") && row1.contains("?+72%"), "{t3}");
        assert!(t3.contains("? ranges apart, but too few rounds"), "{t3}");
        assert!(
            t3.contains("(a hint) at 2 of 4: cpus=1/hogs=0, cpus=1/hogs=2"),
            "{t3}"
        );
        // Through JSON and back (a missing figure, NaN, is `null`).
        let j = serde_json::to_string(&r).unwrap();
        assert_eq!(serde_json::to_string(&parse(&j).unwrap()).unwrap(), j);
        assert!(parse("{\"kind\":\"compare\"}").is_err());
        // What `readpath sweep` cannot write is refused before anything is
        // drawn: a grid beyond MAX_POINTS (its points made to match it),
        // rounds out of range, one variant, an axis value its setting
        // refuses.
        let refused = |r: &SweepReport| {
            parse(&serde_json::to_string(r).unwrap())
                .unwrap_err()
                .to_string()
        };
        let mut big = r.clone();
        big.across[0].values = (1..=9).map(|n| n.to_string()).collect();
        big.across[1].values = (0..8).map(|n| n.to_string()).collect();
        big.points = (0..72).map(|i| r.points[i % 4].clone()).collect();
        let e = refused(&big);
        assert!(
            e.contains("a grid of 9x8 = 72 points") && e.contains("1..=64"),
            "{e}"
        );
        let mut rounds = r.clone();
        rounds.rounds = 0;
        assert!(refused(&rounds).contains("rounds = 0; allowed 1..=100"));
        let mut one = r.clone();
        one.points[2].variants.truncate(1);
        assert!(refused(&one).contains("point 3: 1 variants; allowed 2..=16"));
        let mut bad = r.clone();
        bad.across[1].values[1] = "lots".into();
        assert!(refused(&bad).contains("load.hogs"), "{}", refused(&bad));
        assert!(
            parse("{\"kind\":\"sweep\",\"version\":99}")
                .unwrap_err()
                .to_string()
                .contains("newer")
        );
    }
}
