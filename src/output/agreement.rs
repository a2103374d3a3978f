//! The model held against the kernel across a map: a `sweep` whose axis is
//! `workload.target = model, kernel` runs a preset's A/B on both targets at
//! every point, and this module says, metric by metric, whether the model
//! gives the kernel's answer there. An answer is the one verdict rule's
//! direction ([`crate::output::verdict`]: ranges apart at a chance by noise
//! under 5%, up or down) or none (ranges overlapping, or apart only at a
//! larger chance); the model agrees at a point when its direction is the
//! kernel's. Beside it, how far apart the two changes are in percentage
//! points, since the same direction can still be -94% against -58%. The
//! explorer headlines five metrics ([`HEADLINE`]); the goal a map is held
//! to is [`GOAL_PCT`] of points agreeing on each.

use serde::{Deserialize, Serialize};

use crate::output::experiment::VariantResult;
use crate::output::format::short_key;
use crate::output::verdict::{self, Kind};

/// The metrics the explorer headlines, in its order.
pub const HEADLINE: &[&str] = &[
    "run_delay_ms_per_s",
    "queue_p99_us",
    "p50_us",
    "p99_us",
    "throughput_mib_s",
];

/// The share of points on which the model must give the kernel's answer,
/// per metric, %.
pub const GOAL_PCT: f64 = 80.0;

/// Percentage points within which the model's change must be the kernel's
/// at the seed's own point.
pub const POINTS_TOLERANCE: f64 = 15.0;

/// The key of the target axis.
const TARGET: &str = crate::key!(workload.target).name();

/// What a change says: a direction, or none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Answer {
    /// Higher, ranges apart at a chance by noise under 5%.
    Up,
    /// Lower, likewise.
    Down,
    /// No direction can be claimed (ranges overlap, too few rounds, or
    /// apart only at a chance by noise of 5% or more).
    None,
    /// A side has no value.
    Unmeasured,
}

impl Answer {
    fn of(v: &verdict::Verdict) -> Answer {
        match (v.kind, v.change_pct) {
            (Kind::NotMeasured, _) | (_, None) => Answer::Unmeasured,
            (k, Some(c)) if k.is_significant() => {
                if c > 0.0 {
                    Answer::Up
                } else {
                    Answer::Down
                }
            }
            _ => Answer::None,
        }
    }
}

/// One target's answer on one metric at one point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Side {
    /// Its direction or none.
    pub answer: Answer,
    /// The change A -> B, % (None where unmeasured).
    pub change_pct: Option<f64>,
    /// The chance by noise of ranges this far apart (None where they
    /// overlap).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chance: Option<f64>,
}

/// Model and kernel on one metric at one point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cell {
    /// The metric's name.
    pub metric: String,
    /// The kernel's answer.
    pub kernel: Side,
    /// The model's.
    pub model: Side,
    /// The model's answer is the kernel's (None where either is
    /// unmeasured: such a cell is not counted).
    pub agrees: Option<bool>,
    /// |model's change - kernel's change|, percentage points.
    pub apart_points: Option<f64>,
}

/// One point of the map without its target.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// (key, value) of the other axes (empty: the target is the only one).
    pub at: Vec<(String, String)>,
    /// One cell per [`HEADLINE`] metric.
    pub cells: Vec<Cell>,
}

/// Per metric: on how many points the model agrees, of those measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tally {
    /// The metric's name.
    pub metric: String,
    /// Points where the model gives the kernel's answer.
    pub agree: u32,
    /// Points where both were measured.
    pub of: u32,
}

impl Tally {
    /// The share that agrees, % (None: nothing measured).
    pub fn pct(&self) -> Option<f64> {
        (self.of > 0).then(|| 100.0 * f64::from(self.agree) / f64::from(self.of))
    }

    /// At or over [`GOAL_PCT`].
    pub fn meets_goal(&self) -> bool {
        self.pct().is_some_and(|p| p >= GOAL_PCT)
    }
}

/// The model against the kernel over a whole sweep.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Agreement {
    /// The points, in the sweep's order.
    pub points: Vec<Point>,
    /// Per [`HEADLINE`] metric.
    pub tally: Vec<Tally>,
}

/// An axis of a map: its key and values.
pub type AxisRef<'a> = (&'a str, &'a [String]);
/// A point of a map: where it is, (key, value) per axis, and its variants
/// (A, B).
pub type PointRef<'a> = (&'a [(String, String)], &'a [VariantResult]);

/// One of `axes` is `workload.target` with both `model` and `kernel`.
pub fn of_axes(axes: &[AxisRef<'_>]) -> bool {
    axes.iter().any(|(k, values)| {
        *k == TARGET && values.iter().any(|v| v == "model") && values.iter().any(|v| v == "kernel")
    })
}

/// The agreement over a map of `axes` and `points` (`rounds` each), when
/// one of its axes is `workload.target` with both `model` and `kernel`
/// among its values (None otherwise).
pub fn of(axes: &[AxisRef<'_>], points: &[PointRef<'_>], rounds: u32) -> Option<Agreement> {
    if !of_axes(axes) {
        return None;
    }
    let t = axes.iter().position(|(k, _)| *k == TARGET)?;
    fn target_of(at: &[(String, String)], t: usize) -> Option<&str> {
        at.get(t).map(|(_, v)| v.as_str())
    }
    let rest = |at: &[(String, String)]| -> Vec<(String, String)> {
        at.iter()
            .enumerate()
            .filter(|(i, _)| *i != t)
            .map(|(_, kv)| kv.clone())
            .collect()
    };
    let mut out = Vec::new();
    for (k_at, k_vars) in points
        .iter()
        .filter(|(at, _)| target_of(at, t) == Some("kernel"))
    {
        let at = rest(k_at);
        let Some((_, m_vars)) = points
            .iter()
            .find(|(m_at, _)| target_of(m_at, t) == Some("model") && rest(m_at) == at)
        else {
            continue;
        };
        let cells = HEADLINE
            .iter()
            .map(|name| {
                let kernel = side(k_vars, name, rounds);
                let model = side(m_vars, name, rounds);
                let measured =
                    kernel.answer != Answer::Unmeasured && model.answer != Answer::Unmeasured;
                let apart_points = match (kernel.change_pct, model.change_pct) {
                    (Some(a), Some(b)) => Some((b - a).abs()),
                    _ => None,
                };
                Cell {
                    metric: (*name).to_string(),
                    agrees: measured.then_some(kernel.answer == model.answer),
                    kernel,
                    model,
                    apart_points,
                }
            })
            .collect();
        out.push(Point { at, cells });
    }
    let tally = HEADLINE
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let counted = out.iter().filter_map(|p| p.cells[i].agrees);
            let (agree, of) = counted.fold((0, 0), |(a, n), ok| (a + u32::from(ok), n + 1));
            Tally {
                metric: (*name).to_string(),
                agree,
                of,
            }
        })
        .collect();
    Some(Agreement { points: out, tally })
}

/// A point's answer on `name`, A -> B, by the one rule without a published
/// figure.
fn side(variants: &[VariantResult], name: &str, rounds: u32) -> Side {
    let v = crate::output::experiment::verdict_between(
        variants.first(),
        variants.get(1),
        name,
        rounds,
        None,
    );
    Side {
        answer: Answer::of(&v),
        change_pct: v.change_pct,
        chance: v.chance,
    }
}

/// A metric's short label for the table.
fn label(name: &str) -> &str {
    crate::metrics::table::metric(name).map_or(name, |m| m.label)
}

/// One side's change as the table writes it: `-94%` with a direction,
/// `~-5%` without, `-` unmeasured.
fn side_text(s: &Side) -> String {
    match (s.answer, s.change_pct) {
        (Answer::Unmeasured, _) | (_, None) => "-".into(),
        (Answer::None, Some(c)) => format!("~{c:+.0}%"),
        (_, Some(c)) => format!("{c:+.0}%"),
    }
}

impl Agreement {
    /// One line per metric: `run_delay: the model gives the kernel's answer
    /// at 3 of 4 points (75%; goal 80%)`.
    pub fn summary(&self) -> Vec<String> {
        let mut out = Vec::new();
        for t in &self.tally {
            let l = label(&t.metric);
            out.push(match t.pct() {
                None => format!("model v kernel, {l}: not measured on both"),
                Some(p) => format!(
                    "model v kernel, {l}: the kernel's answer at {} of {} points ({p:.0}%; goal {GOAL_PCT:.0}%){}",
                    t.agree,
                    t.of,
                    if t.meets_goal() { "" } else { ": short" }
                ),
            });
        }
        out
    }

    /// The table: per point and metric, the kernel's change, the model's,
    /// whether the answers agree (`=` or `≠`) and how many points apart.
    pub fn to_text(&self) -> String {
        let mut out = String::from(
            "\nmodel against kernel at each point (kernel | model, = same answer, ≠ not; an answer is a direction with ranges apart at a chance by noise under 5%, ~ none; then how far apart the changes are, in points):\n",
        );
        let name = |p: &Point| {
            if p.at.is_empty() {
                "all".to_string()
            } else {
                p.at.iter()
                    .map(|(k, v)| format!("{}={v}", short_key(k)))
                    .collect::<Vec<_>>()
                    .join("/")
            }
        };
        let texts: Vec<Vec<String>> = self
            .points
            .iter()
            .map(|p| {
                p.cells
                    .iter()
                    .map(|c| {
                        let mark = match c.agrees {
                            Some(true) => "=",
                            Some(false) => "≠",
                            None => " ",
                        };
                        let pts = c
                            .apart_points
                            .map_or(String::new(), |d| format!(" {d:.0}pt"));
                        format!(
                            "{} | {} {mark}{pts}",
                            side_text(&c.kernel),
                            side_text(&c.model)
                        )
                    })
                    .collect()
            })
            .collect();
        let heads: Vec<&str> = HEADLINE.iter().map(|n| label(n)).collect();
        let w0 = self
            .points
            .iter()
            .map(|p| name(p).chars().count())
            .max()
            .unwrap_or(0)
            .max(5);
        let wc: Vec<usize> = (0..heads.len())
            .map(|c| {
                texts
                    .iter()
                    .map(|r| r[c].chars().count())
                    .chain(std::iter::once(heads[c].chars().count()))
                    .max()
                    .unwrap_or(4)
                    + 3
            })
            .collect();
        let mut line = format!("  {:w0$}", "point");
        for (h, w) in heads.iter().zip(&wc) {
            line.push_str(&format!("{h:>w$}"));
        }
        out.push_str(line.trim_end());
        out.push('\n');
        for (p, row) in self.points.iter().zip(&texts) {
            let mut line = format!("  {:w0$}", name(p));
            for (t, w) in row.iter().zip(&wc) {
                line.push_str(&format!("{t:>w$}"));
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

/// A map that held a shipped preset's model against a kernel, as
/// `bench/held.sh` keeps it (`assets/held/PRESET-AXIS.json`: the sweep
/// report's own fields, with when and how it ran): what the explorer's
/// help says of how far the model was held against a kernel.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Held {
    /// When it ran (`2026-12-06`).
    pub measured: String,
    /// The command that ran it.
    pub command: String,
    /// The preset whose A/B it ran.
    pub preset: Option<String>,
    /// Rounds and seconds per run.
    pub rounds: u32,
    /// Measured seconds per run.
    pub duration_s: f64,
    /// The grid.
    pub across: Vec<HeldAxis>,
    /// Settings held fixed beside the preset's at every point
    /// (`workload.cpus=1`), the file size of `bench/held.sh` aside.
    #[serde(default)]
    pub set: Vec<String>,
    /// The kernel's machine (a lab guest).
    pub machine: crate::sys::MachineInfo,
    /// The answers.
    pub agreement: Agreement,
}

/// An axis of a kept map, as the sweep report writes it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct HeldAxis {
    /// `section.key`.
    pub key: String,
    /// Its values.
    pub values: Vec<String>,
}

/// The maps shipped in `assets/held/` (`bench/held.sh` writes them).
const HELD_FILES: &[&str] = &[
    include_str!("../../assets/held/fsverity-bound-vs-unbound-hogs.json"),
    include_str!("../../assets/held/fsverity-bound-vs-unbound-qd.json"),
    include_str!("../../assets/held/fsverity-bound-vs-unbound-readers.json"),
    include_str!("../../assets/held/fsverity-bound-vs-unbound-cpus1-hogs.json"),
    include_str!("../../assets/held/fscrypt-aes-instructions-hogs.json"),
    include_str!("../../assets/held/fscrypt-aes-instructions-qd.json"),
    include_str!("../../assets/held/fscrypt-aes-instructions-readers.json"),
];

/// Every shipped map, parsed (a file that does not parse is a build's
/// test failure, `every_shipped_map_parses_and_names_its_preset`).
pub fn held() -> Vec<Held> {
    HELD_FILES
        .iter()
        .filter_map(|f| serde_json::from_str(f).ok())
        .collect()
}

impl Held {
    /// The point at the preset's own settings, if the map has it (a map
    /// that holds a setting of its own fixed has none).
    fn own_point(&self) -> Option<&Point> {
        if !self.set.is_empty() {
            return None;
        }
        let preset = crate::scenario::preset::shipped(self.preset.as_deref()?)?;
        self.agreement.points.iter().find(|p| {
            p.at.iter().all(|(k, v)| {
                let mut s = preset.settings.clone();
                s.set(k, v).is_ok() && s.get(k) == preset.settings.get(k)
            })
        })
    }
}

/// One paragraph per preset the shipped maps hold against a kernel, for
/// the help: (preset, paragraph). Where and how they ran, over which
/// axes, per metric the points where the model gave the kernel's answer
/// (all its maps together), and each metric at the preset's own point.
pub fn held_by_preset() -> Vec<(String, String)> {
    let maps = held();
    let mut names: Vec<String> = Vec::new();
    for h in &maps {
        if let Some(n) = &h.preset
            && !names.contains(n)
        {
            names.push(n.clone());
        }
    }
    names
        .into_iter()
        .map(|name| {
            let mine: Vec<&Held> = maps
                .iter()
                .filter(|h| h.preset.as_deref() == Some(name.as_str()))
                .collect();
            (name.clone(), paragraph(&mine))
        })
        .collect()
}

/// [`held_by_preset`]'s paragraph over one preset's maps (at least one).
fn paragraph(maps: &[&Held]) -> String {
    let first = maps[0];
    let axes: Vec<String> = maps
        .iter()
        .flat_map(|h| {
            let fixed: Vec<String> = h
                .set
                .iter()
                .map(|kv| match kv.split_once('=') {
                    Some((k, v)) => format!("{}={v}", short_key(k)),
                    None => kv.clone(),
                })
                .collect();
            h.across.iter().filter(|a| a.key != TARGET).map(move |a| {
                let at = if fixed.is_empty() {
                    String::new()
                } else {
                    format!(" at {}", fixed.join(" "))
                };
                format!("{} {}{at}", short_key(&a.key), a.values.join("/"))
            })
        })
        .collect();
    let points: usize = maps.iter().map(|h| h.agreement.points.len()).sum();
    let tally: Vec<String> = HEADLINE
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let (agree, of) = maps
                .iter()
                .filter_map(|h| h.agreement.tally.get(i))
                .fold((0, 0), |(a, n), t| (a + t.agree, n + t.of));
            format!("{} {agree} of {of}", short_label(name))
        })
        .collect();
    let mut s = format!(
        "held against Linux {} ({}, {} CPUs), {}: its A/B on the model and on the kernel in one boot per map, {} rounds x {:.0} s, over {} ({points} points). The model gave the kernel's answer (a direction with ranges apart at a chance by noise under 5%, or none) on {} (goal {GOAL_PCT:.0}% each).",
        first.machine.kernel,
        first.machine.cpu_model,
        first.machine.cpus,
        first.measured,
        first.rounds,
        first.duration_s,
        axes.join(", "),
        tally.join(", "),
    );
    if let Some(p) = maps.iter().find_map(|h| h.own_point()) {
        let at: Vec<String> =
            p.at.iter()
                .map(|(k, v)| format!("{}={v}", short_key(k)))
                .collect();
        let cells: Vec<String> = p
            .cells
            .iter()
            .map(|c| {
                format!(
                    "{} kernel {} model {}",
                    short_label(&c.metric),
                    side_text(&c.kernel),
                    side_text(&c.model)
                )
            })
            .collect();
        s.push_str(&format!(
            " At its own point ({}): {}.",
            at.join(" "),
            cells.join("; ")
        ));
    }
    s.push_str(" The maps: assets/held/ (bench/held.sh), docs/kernel.md.");
    s
}

/// A metric's shortest label (`run_delay`, `q p99`).
fn short_label(name: &str) -> &str {
    crate::metrics::table::metric(name).map_or(name, |m| m.short)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Spread;
    use crate::output::experiment::VariantResult;

    /// A variant whose every headline metric is `v` in every round (a
    /// spread of `v - 1 ..= v + 1` over 5 rounds).
    fn variant(value: &str, v: &[f64]) -> VariantResult {
        VariantResult {
            value: value.into(),
            metrics: HEADLINE
                .iter()
                .zip(v)
                .map(|(n, &x)| {
                    (
                        (*n).to_string(),
                        Spread::of([x - 1.0, x, x + 1.0, x - 0.5, x + 0.5]),
                    )
                })
                .collect(),
            rounds: Vec::new(),
            failed_reads: 0,
        }
    }

    /// A point of the load map: (where, A and B).
    type Owned = (Vec<(String, String)>, Vec<VariantResult>);

    fn point(target: &str, hogs: &str, a: &[f64], b: &[f64]) -> Owned {
        (
            vec![
                ("workload.target".into(), target.into()),
                ("load.hogs".into(), hogs.into()),
            ],
            vec![variant("unbound", a), variant("bound", b)],
        )
    }

    /// The agreement of `points` over target x hogs (`targets` its values).
    fn map(targets: &[&str], points: &[Owned]) -> Option<Agreement> {
        let t: Vec<String> = targets.iter().map(|s| (*s).to_string()).collect();
        let h: Vec<String> = vec!["0".into(), "2".into()];
        let axes: Vec<AxisRef<'_>> = vec![("workload.target", &t), ("load.hogs", &h)];
        let refs: Vec<PointRef<'_>> = points
            .iter()
            .map(|(at, v)| (at.as_slice(), v.as_slice()))
            .collect();
        of(&axes, &refs, 5)
    }

    #[test]
    fn every_shipped_map_parses_and_names_its_preset() {
        assert_eq!(
            held().len(),
            HELD_FILES.len(),
            "a map in assets/held/ does not parse"
        );
        for h in held() {
            let name = h.preset.clone().expect("a shipped map names its preset");
            assert!(
                crate::scenario::preset::shipped(&name).is_some(),
                "{name}: no such shipped preset"
            );
            assert!(h.agreement.tally.iter().all(|t| t.of > 0), "{name}");
        }
    }

    #[test]
    fn each_presets_maps_are_said_together_with_its_own_point() {
        let maps = held();
        let said = held_by_preset();
        for (name, text) in &said {
            let mine: Vec<&Held> = maps
                .iter()
                .filter(|h| h.preset.as_deref() == Some(name.as_str()))
                .collect();
            let (a, n) = mine.iter().fold((0, 0), |(a, n), h| {
                (a + h.agreement.tally[0].agree, n + h.agreement.tally[0].of)
            });
            assert!(text.contains(&format!("run_delay/s {a} of {n}")), "{text}");
            // Each load map holds its preset's own load (fs-verity's 2
            // hogs, fscrypt's none).
            assert!(text.contains("At its own point (hogs="), "{text}");
        }
        assert_eq!(said.len(), 2, "{said:?}");
    }

    #[test]
    fn the_model_agrees_where_its_direction_is_the_kernels() {
        // run_delay, queue p99, p50, p99, MiB/s.
        let a = [100.0, 100.0, 100.0, 100.0, 100.0];
        let points = vec![
            // Model, hogs 0: down, down, none (within 1), up, down.
            point("model", "0", &a, &[50.0, 40.0, 100.5, 150.0, 60.0]),
            // Model, hogs 2: down, up, down, none, up.
            point("model", "2", &a, &[6.0, 300.0, 80.0, 100.0, 120.0]),
            // Kernel, hogs 0: down, up, none, up, down.
            point("kernel", "0", &a, &[6.0, 120.0, 99.5, 130.0, 70.0]),
            // Kernel, hogs 2: down, up, none, none (as the model), up.
            point("kernel", "2", &a, &[10.0, 110.0, 100.0, 101.0, 140.0]),
        ];
        let g = map(&["model", "kernel"], &points).expect("a target axis with model and kernel");
        assert_eq!(g.points.len(), 2);
        assert_eq!(g.points[0].at, vec![("load.hogs".into(), "0".into())]);
        let agree: Vec<(u32, u32)> = g.tally.iter().map(|t| (t.agree, t.of)).collect();
        assert_eq!(agree, vec![(2, 2), (1, 2), (1, 2), (2, 2), (2, 2)]);
        let rd = &g.points[0].cells[0];
        assert_eq!(
            (rd.kernel.answer, rd.model.answer),
            (Answer::Down, Answer::Down)
        );
        // -94% against -50%: 44 points apart.
        assert!((rd.apart_points.unwrap() - 44.0).abs() < 1e-9);
        assert_eq!(rd.kernel.chance, Some(verdict::chance_apart(5, 5)));
        assert!(g.tally[0].meets_goal() && !g.tally[1].meets_goal());
        let text = g.to_text();
        assert!(text.contains("-94% | -50% = 44pt"), "{text}");
        assert!(text.contains("~-1% | ~+0% = 1pt"), "{text}");
        assert!(text.contains("~+0% | -20% ≠ 20pt"), "{text}");
        let lines = g.summary();
        assert!(
            lines.contains(
                &"model v kernel, queue p99 us: the kernel's answer at 1 of 2 points (50%; goal 80%): short"
                    .to_string()
            ),
            "{lines:?}"
        );
        // A sweep without both targets has none.
        assert!(map(&["model"], &points).is_none());
    }
}
