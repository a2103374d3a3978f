//! A/B experiments: run variants of one setting interleaved (A B A B ...)
//! on one engine and one dataset, so slow drift of a shared machine hits
//! every variant alike, and report each variant's median over rounds with
//! its range and the change relative to the first variant, in the form of
//! the kernel patches readpath reproduces ("553,800 us -> 18,962 us, -96%").
//!
//! Each variant is switched in with [`Engine::apply`] (reads in flight
//! drain, the pipeline is rebuilt), then `warmup` of records is dropped and
//! `duration` of records is merged into exact window statistics.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::engine::workload::Workload;
use crate::engine::{Engine, EngineError, EngineOptions};
use crate::metrics::{IntervalRecord, Metric, WindowStats};
use crate::scenario::preset::Compare;
use crate::settings::Settings;
use crate::sys::{Features, MachineInfo};

/// Version of the JSON report.
pub const REPORT_VERSION: u32 = 1;

/// How long and how often.
#[derive(Debug, Clone)]
pub struct CompareOptions {
    /// Rounds (each runs every variant once).
    pub rounds: u32,
    /// Measured time per variant per round.
    pub duration: Duration,
    /// Time dropped after each switch (the pipeline settling).
    pub warmup: Duration,
    /// Engine options (interval, data dir).
    pub engine: EngineOptions,
    /// Polled between records: true ends the experiment early (a signal),
    /// with the rounds that completed reported.
    pub stop: fn() -> bool,
}

/// One metric of a variant: median over rounds, min and max, and the
/// change from the first variant's (the one [`Spread`] of [`crate::metrics`]).
pub use crate::metrics::Spread;

/// The metrics reported for each variant: every metric of the one table
/// ([`crate::metrics::METRICS`]), its name, unit and better direction
/// included, in its order.
pub use crate::metrics::METRICS;

/// One variant's results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VariantResult {
    /// The value of the varied setting.
    pub value: String,
    /// Each metric of [`METRICS`], by name, in that order (a JSON object:
    /// `metrics.p99_us.median`).
    #[serde(with = "ordered_map")]
    pub metrics: Vec<(String, Spread)>,
    /// Every round's window.
    pub rounds: Vec<WindowStats>,
    /// Verity failures and I/O errors over all rounds (must be 0).
    pub failed_reads: u64,
}

impl VariantResult {
    /// The rounds in which metric `name` has a value: those its spread is
    /// over (a round that measured nothing of it, a metric the target
    /// lacks, gives none). A result without its rounds' windows counts
    /// `rounds` (the experiment's).
    pub fn count(&self, name: &str, rounds: u32) -> u32 {
        match crate::metrics::table::metric(name) {
            Some(m) if !self.rounds.is_empty() => self
                .rounds
                .iter()
                .filter(|w| (m.window)(w).is_finite())
                .count() as u32,
            _ => rounds,
        }
    }
}

/// The one rule ([`crate::output::verdict`]) on metric `name` from `a`
/// to `b`, against `published` when given: by each round's value where
/// both results hold their rounds (by ranks: one round out of line lowers
/// a finding's certainty, it does not overturn it), else by their spreads
/// (a result saved without its rounds). `rounds` is the experiment's count.
pub fn verdict_between(
    a: Option<&VariantResult>,
    b: Option<&VariantResult>,
    name: &str,
    rounds: u32,
    published: Option<&crate::scenario::preset::Published>,
) -> crate::output::verdict::Verdict {
    let figure = published.map(|p| (p.figure(), p.sign()));
    let figure = figure.as_ref().map(|(f, s)| (f.as_str(), *s));
    let values = |v: Option<&VariantResult>| {
        let m = crate::metrics::table::metric(name)?;
        let v = v?;
        (!v.rounds.is_empty()).then(|| v.rounds.iter().map(m.window).collect::<Vec<f64>>())
    };
    if let (Some(x), Some(y)) = (values(a), values(b)) {
        return crate::output::verdict::judge_values(&x, &y, figure);
    }
    let spread = |v: Option<&VariantResult>| {
        v.and_then(|v| v.metrics.iter().find(|(n, _)| n == name))
            .map_or(Spread::of(std::iter::empty()), |(_, s)| *s)
    };
    let count = |v: Option<&VariantResult>| v.map_or(0, |v| v.count(name, rounds));
    crate::output::verdict::judge(&spread(a), &spread(b), [count(a), count(b)], figure)
}

/// The whole experiment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompareReport {
    /// [`REPORT_VERSION`].
    pub version: u32,
    /// The preset's name, if one was used.
    pub preset: Option<String>,
    /// The varied setting.
    pub key: String,
    /// Rounds run.
    pub rounds: u32,
    /// Measured seconds per variant per round.
    pub duration_s: f64,
    /// Dropped seconds after each switch.
    pub warmup_s: f64,
    /// The settings of the first variant.
    pub settings: Settings,
    /// The settings as they ran for the first variant (after fallbacks).
    pub effective_settings: Settings,
    /// Results, in the order given.
    pub variants: Vec<VariantResult>,
    /// The notices, the machine and why the runs ended early, if they did.
    #[serde(flatten)]
    pub ran: Conditions,
    /// The published result of the preset's comparison, when this is it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub published: Option<crate::scenario::preset::Published>,
    /// This machine's verdict on it, computed from the first two variants.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<crate::output::verdict::Verdict>,
}

/// What a report's runs met, written the same way by `compare` and
/// `sweep` (flattened into each report's JSON, so both files keep their
/// fields in place): the notices they raised, the machine and its
/// features, and why they ended early.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Conditions {
    /// Notices raised during the runs (fallbacks, refused privileges), each
    /// once.
    pub notices: Vec<String>,
    /// The machine.
    pub machine: MachineInfo,
    /// Kernel and CPU features; `highpri` says whether nice -20 was granted.
    pub features: Features,
    /// Set when a signal or a lost connection stopped the runs early: what
    /// was measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<String>,
}

impl Conditions {
    /// The lines under a report's title: why it ended early, if it did,
    /// then the machine.
    pub(super) fn write_heading(&self, out: &mut String) {
        if let Some(why) = &self.interrupted {
            out.push_str(&format!("INTERRUPTED: {why}\n"));
        }
        out.push_str(&machine_lines(&self.machine, &self.features));
    }

    /// Adds a later part's conditions: its new notices, and why it ended
    /// early when this part did not.
    fn merge(&mut self, later: Conditions) {
        for n in later.notices {
            if !self.notices.contains(&n) {
                self.notices.push(n);
            }
        }
        if self.interrupted.is_none() {
            self.interrupted = later.interrupted;
        }
    }
}

/// A Perfetto trace written to a file.
pub type TraceFile = crate::output::perfetto::TraceWriter<crate::files::OutputFile>;

/// Where an experiment's intervals go besides its tally: a recording and a
/// Perfetto trace. One that fails to write stops there and is said in the
/// report's notices; the experiment goes on.
#[derive(Default)]
pub struct Outputs {
    /// The recording, for `readpath replay`.
    pub recording: Option<crate::output::recording::Writer>,
    /// The trace: every variant a process of its own.
    pub trace: Option<TraceFile>,
    /// What failed, said once each.
    failed: Vec<String>,
}

impl Outputs {
    /// The intervals that follow are the variant `label`'s.
    fn variant(&mut self, label: &str) {
        if let Some(t) = self.trace.as_mut()
            && let Err(e) = t.begin_run(label)
        {
            self.failed.push(format!("the trace stopped: {e}"));
            self.trace = None;
        }
    }

    /// One interval to every output.
    pub fn record(&mut self, r: &IntervalRecord) {
        if let Some(w) = self.recording.as_mut()
            && let Err(e) = w.record(r)
        {
            self.failed.push(format!("the recording stopped: {e}"));
            self.recording = None;
        }
        if let Some(t) = self.trace.as_mut()
            && let Err(e) = t.interval(r)
        {
            self.failed.push(format!("the trace stopped: {e}"));
            self.trace = None;
        }
    }
}

/// Collects records for `warmup` (dropped) then `duration` (kept), after
/// dropping any record that straddles the switch.
pub(super) fn measure(
    engine: &dyn Workload,
    warmup: Duration,
    duration: Duration,
    outputs: &mut Outputs,
    stop: &dyn Fn() -> bool,
) -> (Vec<IntervalRecord>, Vec<String>) {
    let rx = engine.records();
    let mut notices = Vec::new();
    // Records queued before the switch, and the one in flight during it.
    let mut keep = |r: &IntervalRecord, notices: &mut Vec<String>| {
        notices.extend(r.notices.iter().map(|n| n.text.clone()));
        outputs.record(r);
    };
    for r in rx.try_iter() {
        keep(&r, &mut notices);
    }
    // Waits for the next record, giving up when asked to stop.
    let next = || loop {
        if stop() {
            return None;
        }
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(r) => return Some(r),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(_) => return None,
        }
    };
    if let Some(r) = next() {
        keep(&r, &mut notices);
    }
    let kept = window(
        || {
            let r = next()?;
            keep(&r, &mut notices);
            Some(r)
        },
        warmup,
        duration,
    );
    (kept, notices)
}

/// The records of one window: after `warmup` of the workload running,
/// `duration` of it, from `next` (None: no more). Intervals in which the
/// workload did not run (`paused`: a restart after the switch, the kernel
/// target writing its file, a guest's first dataset) count toward neither
/// the warm-up nor the window, which would otherwise end before the
/// workload ran (a CI run found a lab guest's whole kernel window paused);
/// they are waited for up to ten times the warm-up and window plus
/// [`MAX_IDLE_S`], so a workload that never runs again cannot hold the
/// experiment.
fn window(
    mut next: impl FnMut() -> Option<IntervalRecord>,
    warmup: Duration,
    duration: Duration,
) -> Vec<IntervalRecord> {
    let mut dropped = 0.0;
    let mut kept = Vec::new();
    let mut secs = 0.0;
    let mut idle = 0.0;
    let idle_cap = 10.0 * (warmup + duration).as_secs_f64() + MAX_IDLE_S;
    while secs < duration.as_secs_f64() - 1e-6 {
        let Some(r) = next() else { break };
        if r.paused && idle < idle_cap {
            idle += r.interval_s;
            continue;
        }
        if dropped < warmup.as_secs_f64() - 1e-6 {
            dropped += r.interval_s;
            continue;
        }
        secs += r.interval_s;
        kept.push(r);
    }
    kept
}

/// The least time [`measure`] waits for a workload that is not running
/// (on top of ten times its warm-up and window), s.
const MAX_IDLE_S: f64 = 120.0;

/// Runs the experiment; `progress` hears (round, variant index) before each
/// run. With `record` (opened before the workload starts, the header
/// written once it runs), every interval (warm-up included, switches
/// marked) goes to a recording for `readpath replay`; with `trace`, to a
/// Perfetto trace (left there for the caller to finish).
#[allow(clippy::too_many_arguments)]
pub fn run(
    base: &Settings,
    compare: &Compare,
    preset: Option<String>,
    opts: &CompareOptions,
    progress: &mut dyn FnMut(u32, usize),
    dataset_progress: crate::dataset::Progress<'_>,
    record: Option<crate::files::OutputFile>,
    trace: &mut Option<TraceFile>,
) -> Result<CompareReport, EngineError> {
    let variants = compare.variants(base)?;
    let mut engine = Engine::start(variants[0].clone(), opts.engine.clone(), dataset_progress)?;
    let mut outputs = Outputs {
        recording: match record {
            Some(out) => {
                let header =
                    crate::output::recording::Header::of("compare", &engine, preset.clone());
                Some(
                    crate::output::recording::Writer::start(out, &header)
                        .map_err(|e| EngineError::Output(e.to_string()))?,
                )
            }
            None => None,
        },
        trace: trace.take(),
        failed: Vec::new(),
    };
    let report = run_on(
        &mut engine,
        base,
        compare,
        preset,
        opts,
        progress,
        &mut outputs,
    );
    let (_, rest) = engine.stop_with_records();
    for r in rest.try_iter() {
        outputs.record(&r);
    }
    *trace = outputs.trace.take();
    if let Some(w) = outputs.recording.take() {
        w.finish().map_err(|e| EngineError::Output(e.to_string()))?;
    }
    report
}

/// The experiment on a running workload, here or on a target (`compare
/// --hosts`): each variant applied in turn, every round; the caller starts
/// and stops the workload.
pub fn run_on(
    engine: &mut dyn Workload,
    base: &Settings,
    compare: &Compare,
    preset: Option<String>,
    opts: &CompareOptions,
    progress: &mut dyn FnMut(u32, usize),
    outputs: &mut Outputs,
) -> Result<CompareReport, EngineError> {
    let stop = &opts.stop;
    let variants = compare.variants(base)?;
    let effective = engine.effective();
    let mut tally = Tally::new(variants.len());
    let mut interrupted = None;
    let runs = opts.rounds as usize * variants.len();
    'rounds: for round in 0..opts.rounds {
        for (i, v) in variants.iter().enumerate() {
            let done = round as usize * variants.len() + i;
            if stop() {
                interrupted = Some(stopped(&format!("after {done} of {runs} runs")));
                break 'rounds;
            }
            progress(round, i);
            // A remote host whose connection was lost: the rounds done are
            // kept, and the report says why it ends there.
            let lost = |engine: &dyn Workload| {
                engine.lost().map(|why| {
                    format!(
                        "the connection was lost ({why}) after {done} of {runs} runs: the medians are over the rounds that completed"
                    )
                })
            };
            if let Some(why) = lost(engine) {
                interrupted = Some(why);
                break 'rounds;
            }
            if let Err(e) = engine.apply(v.clone()) {
                match lost(engine) {
                    Some(why) => {
                        interrupted = Some(why);
                        break 'rounds;
                    }
                    None => return Err(e),
                }
            }
            engine.mark_event(&format!(
                "caption: round {} of {}: {} = {}",
                round + 1,
                opts.rounds,
                compare.key,
                compare.label(i)
            ));
            outputs.variant(&format!("{} = {}", compare.key, compare.label(i)));
            let (recs, n) = measure(engine, opts.warmup, opts.duration, outputs, stop);
            if let Some(why) = lost(engine) {
                // A run cut short is not a sample of its variant.
                interrupted = Some(why);
                break 'rounds;
            }
            if stop() {
                // A run cut short is not a sample of its variant.
                interrupted = Some(stopped(&format!("during run {} of {runs}", done + 1)));
                break 'rounds;
            }
            tally.add(i, &run_label(round, compare, i), &recs, n);
        }
    }
    let features = engine.features().clone();
    let machine = engine.machine();
    let results = variant_results(compare, tally.per_variant, &tally.failed);
    Ok(CompareReport {
        version: REPORT_VERSION,
        preset,
        key: compare.key.clone(),
        rounds: opts.rounds,
        duration_s: opts.duration.as_secs_f64(),
        warmup_s: opts.warmup.as_secs_f64(),
        settings: variants[0].clone(),
        effective_settings: effective,
        variants: results,
        ran: Conditions {
            notices: tally
                .notices
                .into_iter()
                .chain(outputs.failed.drain(..))
                .collect(),
            machine,
            features,
            interrupted,
        },
        published: None,
        verdict: None,
    })
}

/// Why an experiment ended early on a stop signal, `when` (`after 2 of 6
/// runs`).
pub(super) fn stopped(when: &str) -> String {
    format!(
        "stopped by {} {when}: the medians are over the rounds that completed",
        crate::sys::signal_name(crate::sys::stop_signal())
    )
}

/// What the runs of an experiment measured so far.
pub(super) struct Tally {
    /// Each variant's windows, one per completed run.
    pub(super) per_variant: Vec<Vec<WindowStats>>,
    /// Each variant's failed reads (verity or I/O).
    pub(super) failed: Vec<u64>,
    /// The notices raised, each once.
    pub(super) notices: Vec<String>,
}

impl Tally {
    /// Nothing measured yet, for `variants` variants.
    pub(super) fn new(variants: usize) -> Tally {
        Tally {
            per_variant: vec![Vec::new(); variants],
            failed: vec![0; variants],
            notices: Vec::new(),
        }
    }

    /// Counts a completed run of variant `i` (`what`: the run, in words):
    /// its records and notices. A run that completed no read in its window
    /// is kept (its figures are what happened) and said, so a verdict
    /// resting on a stalled run is not read as the workload's own; so is a
    /// kernel trace that lost events in it (its item counts undercount).
    pub(super) fn add(&mut self, i: usize, what: &str, recs: &[IntervalRecord], n: Vec<String>) {
        for t in n {
            self.notice(t);
        }
        self.failed[i] += recs
            .iter()
            .map(|r| r.counters.verity_failures + r.counters.io_errors)
            .sum::<u64>();
        let lost: u64 = recs
            .iter()
            .filter_map(|r| r.kernel.as_ref())
            .map(|k| k.lost)
            .sum();
        if lost > 0 {
            self.notice(format!(
                "{what}: the kernel's trace lost {lost} events in its window (tracefs overruns: the tracer fell behind): its queue and item figures undercount"
            ));
        }
        if let Some(w) = WindowStats::of(recs) {
            if w.reads == 0 {
                self.notice(format!(
                    "{what}: no read completed in its {:.2} s window: the workload stalled (another program's threads holding its CPUs?)",
                    w.secs
                ));
            }
            self.per_variant[i].push(w);
        }
    }

    fn notice(&mut self, t: String) {
        if !self.notices.contains(&t) {
            self.notices.push(t);
        }
    }
}

/// A run of an experiment in words, for its notices: `round 2,
/// workers.mode = bound` (round counted from 0).
pub(super) fn run_label(round: u32, compare: &Compare, i: usize) -> String {
    format!(
        "round {}, {} = {}",
        round + 1,
        compare.key,
        compare.label(i)
    )
}

/// Each variant's result: each metric's spread over its rounds, and its
/// change from the first variant's median (none where either side has no
/// value).
/// One report of several runs of the same experiment on one host, each
/// of them one round (lab guests booted afresh each round, interleaved
/// with the other hosts): their rounds together, every metric's spread
/// and change taken over all of them. None for no report.
pub fn merge_rounds(compare: &Compare, parts: Vec<CompareReport>) -> Option<CompareReport> {
    let mut parts = parts.into_iter();
    let mut first = parts.next()?;
    let mut per_variant: Vec<Vec<WindowStats>> = first
        .variants
        .iter_mut()
        .map(|v| std::mem::take(&mut v.rounds))
        .collect();
    let mut failed: Vec<u64> = first.variants.iter().map(|v| v.failed_reads).collect();
    let mut rounds = first.rounds;
    for p in parts {
        rounds += p.rounds;
        for (i, v) in p.variants.into_iter().enumerate() {
            if let (Some(w), Some(f)) = (per_variant.get_mut(i), failed.get_mut(i)) {
                w.extend(v.rounds);
                *f += v.failed_reads;
            }
        }
        first.ran.merge(p.ran);
    }
    first.variants = variant_results(compare, per_variant, &failed);
    first.rounds = rounds;
    Some(first)
}

pub(super) fn variant_results(
    compare: &Compare,
    per_variant: Vec<Vec<WindowStats>>,
    failed: &[u64],
) -> Vec<VariantResult> {
    let mut results: Vec<VariantResult> = Vec::new();
    for (i, rounds) in per_variant.into_iter().enumerate() {
        let metrics = METRICS
            .iter()
            .map(|m| {
                let spread = Spread::of(rounds.iter().map(|w| (m.window)(w)));
                (m.name.to_string(), spread)
            })
            .collect();
        results.push(VariantResult {
            value: compare.label(i),
            metrics,
            rounds,
            failed_reads: failed[i],
        });
    }
    let reference: Vec<f64> = results
        .first()
        .map(|r| r.metrics.iter().map(|(_, s)| s.median).collect())
        .unwrap_or_default();
    for r in results.iter_mut().skip(1) {
        for ((_, s), base) in r.metrics.iter_mut().zip(&reference) {
            // No change where either side has no value (a metric one
            // target does not measure: the kernel's page-cache hit rate).
            s.change_pct = (*base != 0.0 && base.is_finite() && s.median.is_finite())
                .then(|| (s.median - base) / base * 100.0);
        }
    }
    results
}

/// `compare --hosts`: the same experiment on each machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostsReport {
    /// [`REPORT_VERSION`].
    pub version: u32,
    /// Each host (`local`, `ssh:phone`) and its experiment, or why it has
    /// none (refused, connection lost).
    pub hosts: Vec<HostResult>,
    /// With lab kernels before and after a seed: its verdict, computed
    /// from the hosts' results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<SeedVerdict>,
    /// True when the hosts ran one after the other (lab guests, which
    /// share this machine's CPUs), false when at the same time.
    #[serde(default)]
    pub one_at_a_time: bool,
}

/// A seed before and after, on real kernels (lab guests) and in the model
/// beside each: the change of each metric, and whether the published
/// direction shows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SeedVerdict {
    /// The seed (`fsverity-2023`).
    pub seed: String,
    /// The published result, in words.
    pub published: String,
    /// The metric it is about.
    pub metric: String,
    /// The host whose kernel has the seed reverted (before).
    pub before: String,
    /// The host whose kernel has it (after).
    pub after: String,
    /// Per metric: (name, the kernel's before -> after, the model's).
    pub rows: Vec<SeedRow>,
    /// On the headline metric: the kernel's verdict, then the model's.
    pub kernel: String,
    /// The model's.
    pub model: String,
    /// What the hosts said of the seed's setting (a fallback: the model
    /// could not run it as asked on that kernel, so its before and after
    /// may be one setting, and its change the lab's noise).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub setting_notes: Vec<String>,
}

/// One metric of a [`SeedVerdict`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SeedRow {
    /// The metric's name.
    pub metric: String,
    /// The kernel's (before, after).
    pub kernel: Option<(Spread, Spread)>,
    /// The model's (before, after).
    pub model: Option<(Spread, Spread)>,
}

/// What a [`SeedVerdict`] is judged by (the lab's seed table says it of
/// each seed, with its preset's published result).
#[derive(Debug, Clone)]
pub struct SeedFacts<'a> {
    /// The seed's name (`fsverity-2023`).
    pub name: &'a str,
    /// The published result, oriented before (the seed reverted) -> after.
    pub published: crate::scenario::preset::Published,
    /// The model's setting that stands for the seed (`workers.mode`).
    pub setting: &'a str,
}

impl SeedVerdict {
    /// The verdict of `seed` from `report` (each host's variants: the
    /// kernel target first, then the model); `is_before` says which hosts
    /// run the kernel with the seed reverted.
    pub fn of(
        seed: SeedFacts<'_>,
        report: &HostsReport,
        is_before: impl Fn(&str) -> bool,
    ) -> SeedVerdict {
        let before = report.hosts.iter().find(|h| is_before(&h.host));
        let after = report.hosts.iter().find(|h| !is_before(&h.host));
        let spread = |h: Option<&HostResult>, variant: usize, metric: &str| {
            let v = h?.report.as_ref()?.variants.get(variant)?;
            let s = v.metrics.iter().find(|(n, _)| n == metric)?.1;
            s.median.is_finite().then_some(s)
        };
        let pair = |variant: usize, metric: &str| {
            Some((
                spread(before, variant, metric)?,
                spread(after, variant, metric)?,
            ))
        };
        fn result(h: Option<&HostResult>, variant: usize) -> Option<&VariantResult> {
            h?.report.as_ref()?.variants.get(variant)
        }
        let rounds =
            |h: Option<&HostResult>| h.and_then(|h| h.report.as_ref()).map_or(0, |r| r.rounds);
        let metric = seed.published.metric.as_str();
        let mut names = vec![metric];
        for m in [
            "throughput_mib_s",
            "p50_us",
            "p99_us",
            "queue_p99_us",
            "run_delay_ms_per_s",
            "moved_pct",
            "unbound_pct",
            "highpri_pct",
        ] {
            if !names.contains(&m) {
                names.push(m);
            }
        }
        let rows: Vec<SeedRow> = names
            .iter()
            .map(|m| SeedRow {
                metric: m.to_string(),
                kernel: pair(0, m),
                model: pair(1, m),
            })
            .filter(|r| r.kernel.is_some() || r.model.is_some())
            .collect();
        let verdict = |variant: usize| match pair(variant, metric) {
            None => "not measured".to_string(),
            // Each host's rounds (the before's and the after's counts are
            // each their own where a result lacks its rounds' windows).
            Some(_) => {
                verdict_between(
                    result(before, variant),
                    result(after, variant),
                    metric,
                    rounds(before).min(rounds(after)),
                    Some(&seed.published),
                )
                .text
            }
        };
        SeedVerdict {
            seed: seed.name.into(),
            published: format!(
                "{} ({}): {}",
                seed.published.figure(),
                seed.published.source,
                seed.published.result
            ),
            metric: metric.into(),
            before: before.map(|h| h.host.clone()).unwrap_or_default(),
            after: after.map(|h| h.host.clone()).unwrap_or_default(),
            kernel: verdict(0),
            model: verdict(1),
            rows,
            setting_notes: [before, after]
                .iter()
                .filter_map(|h| h.and_then(|h| h.report.as_ref().map(|r| (h, r))))
                .flat_map(|(h, r)| {
                    r.ran
                        .notices
                        .iter()
                        .filter(|n| n.contains(seed.setting))
                        .map(move |n| format!("{}: {n}", h.host))
                })
                .collect(),
        }
    }

    /// The verdict as text: a table (before -> after and the change, on the
    /// kernel and in the model) and a line each.
    pub fn to_text(&self) -> String {
        let change = |m: &crate::metrics::Metric, p: &Option<(Spread, Spread)>| match p {
            Some((b, a)) => format!(
                "{} -> {} ({})",
                m.cell(b.median).trim(),
                m.cell(a.median).trim(),
                pct_change(b.median, a.median).map_or("-".into(), |c| format!("{c:+.0}%"))
            ),
            None => "-".into(),
        };
        let mut t = vec![[
            String::new(),
            "real kernel, before -> after".to_string(),
            "model, before -> after".to_string(),
        ]];
        for r in &self.rows {
            let Some(m) = crate::metrics::table::metric(&r.metric) else {
                continue;
            };
            t.push([
                m.label.to_string(),
                change(m, &r.kernel),
                change(m, &r.model),
            ]);
        }
        let w: Vec<usize> = (0..3)
            .map(|c| t.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
            .collect();
        let mut out = format!(
            "\nseed {}: before = {} (the seed reverted), after = {}\n",
            self.seed, self.before, self.after
        );
        for r in &t {
            out.push_str(&format!(
                "{:<a$}  {:>b$}  {:>c$}\n",
                r[0],
                r[1],
                r[2],
                a = w[0],
                b = w[1],
                c = w[2]
            ));
        }
        let label =
            crate::metrics::table::metric(&self.metric).map_or(self.metric.as_str(), |m| m.label);
        out.push_str(&format!(
            "published: {}\nreal kernel, {label}: {}\nmodel, {label}: {}\n",
            self.published, self.kernel, self.model
        ));
        for n in &self.setting_notes {
            out.push_str(&format!("  the model's setting: {n}\n"));
        }
        out
    }
}

use crate::output::verdict::pct_change;

/// One host of `compare --hosts`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostResult {
    /// `local` or the `--remote` spec.
    pub host: String,
    /// Its experiment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report: Option<CompareReport>,
    /// Why it has none, or why it is partial.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl HostsReport {
    /// One table, a column group per host (its variants' medians and each
    /// change against its own first variant, `~` where the ranges
    /// overlap), then each host's machine line.
    pub fn to_text(&self) -> String {
        let done: Vec<(&str, &CompareReport)> = self
            .hosts
            .iter()
            .filter_map(|h| h.report.as_ref().map(|r| (h.host.as_str(), r)))
            .collect();
        let mut out = String::new();
        if let Some((_, r)) = done.first() {
            out.push_str(&format!(
                "readpath compare --hosts: {} = {} | {} round(s) x {:.0}s per variant, interleaved on each host, {}\n\n",
                r.key,
                r.variants
                    .iter()
                    .map(|v| v.value.as_str())
                    .collect::<Vec<_>>()
                    .join(" vs "),
                r.rounds,
                r.duration_s,
                if self.one_at_a_time && self.hosts.len() == 1 {
                    "in one boot of the guest"
                } else if self.one_at_a_time {
                    "lab guests one at a time, round by round, each booted afresh"
                } else {
                    "hosts at the same time"
                }
            ));
        }
        if !done.is_empty() {
            write_hosts_table(&mut out, &done);
        }
        if let Some(v) = &self.seed {
            out.push_str(&v.to_text());
            out.push('\n');
        } else {
            write_host_verdicts(&mut out, &done);
        }
        self.write_machines(&mut out);
        out
    }

    /// Each host's machine line, with why its experiment ended early or
    /// why it has none.
    fn write_machines(&self, out: &mut String) {
        for h in &self.hosts {
            match (&h.report, &h.error) {
                (Some(r), e) => {
                    out.push_str(&format!("{}: {}\n", h.host, r.ran.machine.line()));
                    if let Some(why) = &r.ran.interrupted {
                        out.push_str(&format!("  INTERRUPTED: {why}\n"));
                    }
                    if let Some(e) = e {
                        out.push_str(&format!("  {e}\n"));
                    }
                }
                (None, Some(e)) => out.push_str(&format!("{}: no result: {e}\n", h.host)),
                (None, None) => out.push_str(&format!("{}: no result\n", h.host)),
            }
        }
    }
}

/// The hosts' column titles: the group row (each host's name over its
/// first column) and the title row (its variants, a change after each but
/// the first).
fn hosts_titles(done: &[(&str, &CompareReport)]) -> (Vec<String>, Vec<String>) {
    // Titles: a group per host.
    let mut group = vec![String::new()];
    let mut titles = vec![String::new()];
    for (host, r) in done {
        for (i, v) in r.variants.iter().enumerate() {
            group.push(if i == 0 {
                host.to_string()
            } else {
                String::new()
            });
            titles.push(v.value.clone());
            if i > 0 {
                group.push(String::new());
                titles.push("change".into());
            }
        }
    }
    (group, titles)
}

/// The hosts' rows: per metric some host measured, its label, then each
/// host's medians and changes.
fn hosts_rows(done: &[(&str, &CompareReport)]) -> Vec<Vec<String>> {
    let mut rows: Vec<Vec<String>> = Vec::new();
    for (k, metric) in METRICS.iter().enumerate() {
        if done.iter().all(|(_, r)| r.unmeasured(k)) {
            continue;
        }
        let mut row = vec![metric.label.to_string()];
        for (_, r) in done {
            for (i, v) in r.variants.iter().enumerate() {
                row.push(metric.cell(v.metrics[k].1.median));
                if i > 0 {
                    row.push(change_cell(r, i, k).0);
                }
            }
        }
        rows.push(row);
    }
    rows
}

/// The hosts' table (a group row, the titles, a row per metric) and the
/// overlap note, aligned, for the hosts that have a result.
fn write_hosts_table(out: &mut String, done: &[(&str, &CompareReport)]) {
    let (group, titles) = hosts_titles(done);
    let rows = hosts_rows(done);
    let cols = titles.len();
    let widths: Vec<usize> = (0..cols)
        .map(|c| {
            rows.iter()
                .map(|r| r[c].chars().count())
                .chain([titles[c].chars().count(), group[c].chars().count()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: &[String]| {
        let mut l = String::new();
        for (c, cell) in cells.iter().enumerate() {
            if c == 0 {
                l.push_str(&format!("{:<w$}", cell, w = widths[0]));
            } else {
                l.push_str(&format!("  {:>w$}", cell, w = widths[c]));
            }
        }
        l.trim_end().to_string() + "\n"
    };
    // The host's name over its first column, left-aligned.
    let mut g = String::new();
    for (c, cell) in group.iter().enumerate() {
        let w = widths[c];
        if c == 0 {
            g.push_str(&" ".repeat(w));
        } else {
            g.push_str(&format!("  {:<w$}", cell));
        }
    }
    out.push_str(g.trim_end());
    out.push('\n');
    out.push_str(&line(&titles));
    for r in &rows {
        out.push_str(&line(r));
    }
    if done.iter().any(|(_, r)| r.rounds > 1) {
        out.push_str("~: the ranges of the rounds overlap (not significant)\n");
    }
    if let Some(r) = done.iter().map(|(_, r)| r.rounds).filter(|r| *r > 1).min() {
        out.push_str(few_rounds_note(r).trim_start());
    }
    out.push('\n');
}

/// Each host's verdict against the preset's published result (its first
/// two variants, with its chance by noise), under the published line.
fn write_host_verdicts(out: &mut String, done: &[(&str, &CompareReport)]) {
    let mut published = false;
    for (host, r) in done {
        let Some((p, v)) = r.verdict_of(host) else {
            continue;
        };
        if !published {
            out.push_str(&p);
            published = true;
        }
        out.push_str(&v);
    }
    if published {
        out.push('\n');
    }
}

/// Under a table of `rounds` rounds a variant, where ranges apart are
/// no finding in so few ([`crate::output::verdict::chance_apart`] of 5% or
/// more): that a change without `~` is a hint only. Empty otherwise.
fn few_rounds_note(rounds: u32) -> String {
    use crate::output::verdict::{FINDING, ROUNDS_FOR_FINDING, chance_apart, chance_text};
    let p = chance_apart(rounds, rounds);
    if rounds < 2 || p < FINDING {
        return String::new();
    }
    format!(
        "\n{rounds} v {rounds} rounds: noise alone puts two ranges apart {} of the time, so a change without ~ is a hint, not a finding; run --rounds {ROUNDS_FOR_FINDING} or more.\n",
        chance_text(p)
    )
}

/// Variant `i`'s change of metric `k` against the first variant as a
/// cell (`+12%`, `~-3%` where the one rule calls it noise: a chance by
/// noise of 5% or more, by the rounds' ranks; `-` without a value), and
/// whether it was noise. One round has no spread to judge by: never `~`.
fn change_cell(r: &CompareReport, i: usize, k: usize) -> (String, bool) {
    let m = &METRICS[k];
    let Some(c) = r.variants[i].metrics[k].1.change_pct else {
        return ("-".into(), false);
    };
    let v = verdict_between(
        r.variants.first(),
        r.variants.get(i),
        m.name,
        r.rounds,
        None,
    );
    let noise = r.rounds > 1 && v.kind == crate::output::verdict::Kind::Noise;
    (format!("{}{c:+.0}%", if noise { "~" } else { "" }), noise)
}

impl CompareReport {
    /// True when no variant measured metric `k` (every median 0 or none):
    /// a stage or a cache the runs lack, left out of the tables.
    fn unmeasured(&self, k: usize) -> bool {
        self.variants.iter().all(|v| {
            let m = v.metrics[k].1.median;
            !m.is_finite() || m == 0.0
        })
    }

    /// Judges the first two variants against `published` (the preset's
    /// own comparison) and keeps both in the report.
    pub fn judge(&mut self, published: crate::scenario::preset::Published) {
        let has = |i: usize| {
            self.variants
                .get(i)
                .filter(|v| v.metrics.iter().any(|(n, _)| *n == published.metric))
        };
        self.verdict = match (has(0), has(1)) {
            (Some(a), Some(b)) => Some(verdict_between(
                Some(a),
                Some(b),
                &published.metric,
                self.rounds,
                Some(&published),
            )),
            _ => None,
        };
        self.published = Some(published);
    }

    /// The published result and this machine's verdict, two lines.
    pub fn verdict_lines(&self) -> Option<String> {
        let (published, verdict) = self.verdict_of("this machine")?;
        Some(published + &verdict)
    }

    /// The published line and `who`'s verdict line (`this machine, run_delay
    /// ms/s unbound -> bound: reproduced: ...`), each ending in a newline.
    fn verdict_of(&self, who: &str) -> Option<(String, String)> {
        let (p, v) = (self.published.as_ref()?, self.verdict.as_ref()?);
        let label = crate::metrics::table::metric(&p.metric).map_or(p.metric.as_str(), |m| m.label);
        let (a, b) = (&self.variants.first()?.value, &self.variants.get(1)?.value);
        Some((
            format!(
                "published ({}): {}: {label} {}\n",
                p.source,
                p.result,
                p.figure()
            ),
            format!("{who}, {label} {a} -> {b}: {}\n", v.text),
        ))
    }

    /// The table, for a terminal.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        self.write_heading(&mut out);
        let (rows, overlapped) = self.rows();
        self.write_table(&mut out, &rows);
        if let Some(v) = self.verdict_lines() {
            out.push('\n');
            out.push_str(&v);
        }
        self.write_notes(&mut out, overlapped);
        out
    }

    /// The lines over the table: the experiment, the machine, its idle and
    /// frequency policy, and the first variant's plan.
    fn write_heading(&self, out: &mut String) {
        out.push_str(&format!(
            "readpath compare: {} = {} | {} round(s) x {:.0}s per variant, interleaved, {:.1}s warm-up{}\n",
            self.key,
            self.variants
                .iter()
                .map(|v| v.value.as_str())
                .collect::<Vec<_>>()
                .join(" vs "),
            self.rounds,
            self.duration_s,
            self.warmup_s,
            self.preset
                .as_ref()
                .map_or(String::new(), |p| format!(" | preset {p}")),
        ));
        self.ran.write_heading(out);
        out.push_str(&format!(
            "plan of the first variant: {}\n\n",
            crate::engine::stages::Plan::label(&self.effective_settings)
        ));
    }

    /// The table's rows, (label, cells) per metric some variant measured,
    /// and whether any change's ranges overlap.
    fn rows(&self) -> (Vec<(String, Vec<String>)>, bool) {
        let one_round = self.rounds <= 1;
        // A cell: the median, and its range where there is one.
        let cell = |s: &Spread, m: &Metric| {
            if one_round || !s.median.is_finite() {
                m.cell(s.median)
            } else {
                format!("{} ({}-{})", m.cell(s.median), m.cell(s.min), m.cell(s.max))
            }
        };
        // A change: `~` where the one rule calls it noise, and no mark
        // with one round, which has no range to judge by.
        let mut overlapped = false;
        let mut change = |i: usize, k: usize| {
            let (cell, noise) = change_cell(self, i, k);
            overlapped |= noise;
            cell
        };
        // Rows where no variant measured anything (every median 0 or
        // none) are left out: they are a stage or a cache the runs lack.
        let mut rows: Vec<(String, Vec<String>)> = Vec::new();
        for (k, metric) in METRICS.iter().enumerate() {
            if self.unmeasured(k) {
                continue;
            }
            let mut cols = Vec::new();
            for (i, v) in self.variants.iter().enumerate() {
                cols.push(cell(&v.metrics[k].1, metric));
                if i > 0 {
                    cols.push(change(i, k));
                }
            }
            rows.push((metric.label.to_string(), cols));
        }
        (rows, overlapped)
    }

    /// The table: the column titles, then `rows`, right-aligned.
    fn write_table(&self, out: &mut String, rows: &[(String, Vec<String>)]) {
        let one_round = self.rounds <= 1;
        // Column titles: each variant, and after each but the first its
        // change against the first.
        let mut titles = Vec::new();
        for (i, v) in self.variants.iter().enumerate() {
            titles.push(v.value.clone());
            if i > 0 {
                titles.push(if self.variants.len() > 2 {
                    format!("vs {}", self.variants[0].value)
                } else {
                    "change".to_string()
                });
            }
        }
        let widths: Vec<usize> = (0..titles.len())
            .map(|c| {
                rows.iter()
                    .map(|(_, cols)| cols[c].chars().count())
                    .chain(std::iter::once(titles[c].chars().count()))
                    .max()
                    .unwrap_or(4)
                    + 3
            })
            .collect();
        let first = if one_round {
            "median"
        } else {
            "median (min-max)"
        };
        let mut header = format!("{first:<16}");
        for (t, w) in titles.iter().zip(&widths) {
            header.push_str(&format!("{t:>w$}"));
        }
        out.push_str(header.trim_end());
        out.push('\n');
        for (label, cols) in rows {
            let mut line = format!("{label:<16}");
            for (c, w) in cols.iter().zip(&widths) {
                line.push_str(&format!("{c:>w$}"));
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
    }

    /// The notes under the table: what one round or an overlap means,
    /// failed reads, what run_delay counts, and the notices.
    fn write_notes(&self, out: &mut String, overlapped: bool) {
        if self.rounds <= 1 {
            out.push_str(
                "\n1 round: no spread to judge a change by; run --rounds 4 or more for ranges and significance.\n",
            );
        } else {
            if overlapped {
                out.push_str("\n~: noise alone would put the two variants this far apart 5% of the time or more (by the rounds' ranks; the ranges overlap): the change is not significant.\n");
            }
            out.push_str(&few_rounds_note(self.rounds));
        }
        let failed: u64 = self.variants.iter().map(|v| v.failed_reads).sum();
        if failed > 0 {
            out.push_str(&format!(
                "\nWARNING: {failed} reads failed (verity or I/O); they are not counted as data\n"
            ));
        }
        out.push_str("\nrun_delay ms/s: ms per second of wall time the workers spent runnable but not running (summed over the workers).\n");
        for n in &self.ran.notices {
            out.push_str(&format!("notice: {n}\n"));
        }
    }
}

/// A list of (name, value) pairs as a JSON object, order kept.
mod ordered_map {
    use serde::de::{Deserializer, MapAccess, Visitor};
    use serde::ser::{SerializeMap, Serializer};

    use super::Spread;

    pub fn serialize<S: Serializer>(v: &[(String, Spread)], s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(v.len()))?;
        for (k, x) in v {
            m.serialize_entry(k, x)?;
        }
        m.end()
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<(String, Spread)>, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Vec<(String, Spread)>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a map of metric name to spread")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
                let mut out = Vec::new();
                while let Some(e) = a.next_entry()? {
                    out.push(e);
                }
                Ok(out)
            }
        }
        d.deserialize_map(V)
    }
}

/// The machine, its crypto instructions, its idle and frequency policy
/// and who reads iowait: two lines under a report's title.
pub(super) fn machine_lines(m: &MachineInfo, features: &Features) -> String {
    let mut out = String::new();
    out.push_str(&format!(
            "machine: Linux {}, {} ({} CPUs), AES instructions {}, SHA instructions {}, data dir on {}, high priority {}\n",
            m.kernel,
            m.cpu_model,
            m.cpus,
            yes(features.aes_instructions),
            yes(features.sha_instructions),
            m.data_dir_fs,
            if features.highpri { "granted" } else { "refused (nice 0)" },
        ));
    let consumers = m.iowait_consumers();
    out.push_str(&format!(
        "idle and frequency: {}; iowait read by: {}\n",
        m.idle_and_freq(),
        if consumers.is_empty() {
            "nothing (iowait vs plain can change accounting only, not speed)".to_string()
        } else {
            consumers.join(", ")
        }
    ));
    out
}

fn yes(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_window_counts_only_intervals_the_workload_ran() {
        use crate::metrics::IntervalRecord;
        use std::time::Duration;
        let rec = |seq: u64, paused: bool| IntervalRecord {
            seq,
            interval_s: 0.5,
            paused,
            ..Default::default()
        };
        // Four paused intervals (a restart), then the workload runs.
        let mut feed = (0..4)
            .map(|s| rec(s, true))
            .chain((4..20).map(|s| rec(s, false)));
        let w = super::window(
            || feed.next(),
            Duration::from_secs(1),
            Duration::from_secs(2),
        );
        let seqs: Vec<u64> = w.iter().map(|r| r.seq).collect();
        assert_eq!(seqs, [6, 7, 8, 9], "warm-up 4-5, window 6-9");
        // A workload that never runs again ends the window at the bound.
        let mut endless = (0..).map(|s| rec(s, true));
        let w = super::window(
            || endless.next(),
            Duration::from_secs(1),
            Duration::from_secs(2),
        );
        assert!(w.iter().all(|r| r.paused) && !w.is_empty());
    }

    use super::*;

    /// A report of two variants over `rounds`, the second's throughput
    /// ranges as given, everything else measured by neither but p99.
    fn report(rounds: u32, a: (f64, f64, f64), b: (f64, f64, f64)) -> CompareReport {
        let spread = |(median, min, max): (f64, f64, f64), change_pct| Spread {
            median,
            min,
            max,
            change_pct,
        };
        let variant = |value: &str, t, change| VariantResult {
            value: value.into(),
            metrics: METRICS
                .iter()
                .map(|m| {
                    let name = &m.name;
                    let s = match *name {
                        "throughput_mib_s" => spread(t, change),
                        "p99_us" => spread((100.0, 90.0, 110.0), change.map(|_| 0.0)),
                        _ => spread((0.0, 0.0, 0.0), None),
                    };
                    (name.to_string(), s)
                })
                .collect(),
            rounds: Vec::new(),
            failed_reads: 0,
        };
        let change = (b.0 - a.0) / a.0 * 100.0;
        CompareReport {
            version: REPORT_VERSION,
            preset: None,
            key: "workers.mode".into(),
            rounds,
            duration_s: 1.0,
            warmup_s: 1.0,
            settings: Settings::default(),
            effective_settings: Settings::default(),
            variants: vec![
                variant("bound", a, None),
                variant("unbound", b, Some(change)),
            ],
            ran: Conditions {
                notices: Vec::new(),
                machine: Default::default(),
                features: Default::default(),
                interrupted: None,
            },
            published: None,
            verdict: None,
        }
    }

    #[test]
    fn the_conditions_keep_their_place_in_both_reports_json() {
        let mut r = report(1, (1.0, 1.0, 1.0), (2.0, 2.0, 2.0));
        r.ran.interrupted = Some("stopped".into());
        r.published = crate::output::sweep::fixture().published;
        let json = serde_json::to_string(&r).unwrap();
        let at = |k: &str| json.find(&format!("\"{k}\":")).unwrap();
        assert!(at("variants") < at("notices"));
        assert!(at("notices") < at("machine") && at("machine") < at("features"));
        assert!(at("features") < at("interrupted") && at("interrupted") < at("published"));
        assert_eq!(serde_json::from_str::<CompareReport>(&json).unwrap(), r);
        // The sweep's conditions come last, after its published result.
        let s = crate::output::sweep::fixture();
        let json = serde_json::to_string(&s).unwrap();
        let at = |k: &str| json.rfind(&format!("\"{k}\":")).unwrap();
        assert!(at("published") < at("notices") && at("notices") < at("machine"));
        assert!(json.ends_with(&format!(
            "\"features\":{}}}",
            serde_json::to_string(&s.ran.features).unwrap()
        )));
    }

    #[test]
    fn a_later_part_adds_its_new_notices_and_the_first_reason_to_stop_stays() {
        let c = |n: &[&str], why: Option<&str>| Conditions {
            notices: n.iter().map(|s| s.to_string()).collect(),
            machine: Default::default(),
            features: Default::default(),
            interrupted: why.map(String::from),
        };
        let mut first = c(&["a", "b"], None);
        first.merge(c(&["b", "c"], Some("lost")));
        first.merge(c(&[], Some("later")));
        assert_eq!(first, c(&["a", "b", "c"], Some("lost")));
    }

    #[test]
    fn rounds_run_apart_merge_into_one_report_over_all_of_them() {
        let one = |a: f64, b: f64| {
            let mut r = report(1, (a, a, a), (b, b, b));
            for (v, t) in r.variants.iter_mut().zip([a, b]) {
                v.rounds = vec![WindowStats {
                    throughput_mib_s: t,
                    ..Default::default()
                }];
                v.failed_reads = 1;
            }
            r.ran.notices = vec![format!("n{a}"), "same".into()];
            r
        };
        let cmp = Compare::of("workers.mode", vec!["bound".into(), "unbound".into()]);
        let m = merge_rounds(
            &cmp,
            vec![one(100.0, 150.0), one(120.0, 130.0), one(80.0, 170.0)],
        )
        .unwrap();
        assert_eq!(m.rounds, 3);
        let mib = |v: &VariantResult| {
            v.metrics
                .iter()
                .find(|(n, _)| n == "throughput_mib_s")
                .unwrap()
                .1
        };
        let (a, b) = (mib(&m.variants[0]), mib(&m.variants[1]));
        assert_eq!((a.min, a.median, a.max), (80.0, 100.0, 120.0));
        assert_eq!((b.min, b.median, b.max), (130.0, 150.0, 170.0));
        assert_eq!(b.change_pct, Some(50.0));
        assert_eq!(m.variants[1].rounds.len(), 3);
        assert_eq!(m.variants[0].failed_reads, 3);
        assert_eq!(m.ran.notices, vec!["n100", "same", "n120", "n80"]);
        assert!(merge_rounds(&cmp, Vec::new()).is_none());
    }

    #[test]
    fn one_guest_says_its_verdict_with_its_chance_by_noise() {
        let mut r = report(5, (150.0, 140.0, 160.0), (102.0, 96.0, 108.0));
        r.judge(crate::scenario::preset::Published {
            source: "v4.17".into(),
            metric: "throughput_mib_s".into(),
            change: (-40.0, -20.0),
            result: "slower".into(),
        });
        let hosts = HostsReport {
            version: REPORT_VERSION,
            hosts: vec![HostResult {
                host: "vm:6.1-switches".into(),
                report: Some(r),
                error: None,
            }],
            seed: None,
            one_at_a_time: true,
        };
        let t = hosts.to_text();
        assert!(
            t.contains("published (v4.17): slower: MiB/s -20..-40%\n"),
            "{t}"
        );
        assert!(
            t.contains(
                "vm:6.1-switches, MiB/s bound -> unbound: reproduced: -32% (published -20..-40%); 5 v 5 rounds, chance by noise 0.79%\n"
            ),
            "{t}"
        );
    }

    #[test]
    fn a_seed_verdict_reads_the_kernel_and_the_model_on_each_kernel() {
        let host = |name: &str, r| HostResult {
            host: name.into(),
            report: Some(r),
            error: None,
        };
        let hosts = HostsReport {
            version: REPORT_VERSION,
            hosts: vec![
                host(
                    "vm:6.1",
                    report(4, (150.0, 140.0, 160.0), (102.0, 96.0, 108.0)),
                ),
                host(
                    "vm:6.1-revert-fscrypt-2018",
                    report(4, (100.0, 90.0, 110.0), (100.0, 95.0, 105.0)),
                ),
            ],
            seed: None,
            one_at_a_time: true,
        };
        let seed = SeedFacts {
            name: "fscrypt-2018",
            published: crate::scenario::preset::Published {
                source: "v4.17".into(),
                metric: "throughput_mib_s".into(),
                change: (25.0, 35.0),
                result: "tar of encrypted directories 25-35% faster with AES-NI off".into(),
            },
            setting: "workers.mode",
        };
        let v = SeedVerdict::of(seed.clone(), &hosts, |h| h.contains("revert"));
        assert_eq!(v.before, "vm:6.1-revert-fscrypt-2018");
        assert_eq!(v.after, "vm:6.1");
        assert_eq!(
            v.kernel,
            "reproduced: +50% (published +25..+35%); 4 v 4 rounds, chance by noise 2.9%"
        );
        assert_eq!(
            v.model,
            "within noise: +2%, the ranges overlap (published +25..+35%); 4 v 4 rounds"
        );
        // Each side's own rounds with a value: the after kernel's fourth
        // round measured nothing of the metric (3 v 4: 5.7% by noise).
        let mut short = hosts.clone();
        let w = |t: f64| WindowStats {
            throughput_mib_s: t,
            ..Default::default()
        };
        let after = short.hosts[0].report.as_mut().unwrap();
        after.variants[0].rounds = vec![w(150.0), w(140.0), w(160.0), w(f64::NAN)];
        let v = SeedVerdict::of(seed, &short, |h| h.contains("revert"));
        assert_eq!(
            v.kernel,
            "a hint, not a finding: +50%, ranges apart (published +25..+35%); 4 v 3 rounds, chance by noise 5.7% (4 rounds or more a side needed)"
        );
        let t = v.to_text();
        assert!(t.contains("real kernel, before -> after"), "{t}");
        let mib = t.lines().find(|l| l.starts_with("MiB/s")).unwrap();
        assert!(mib.contains("(+50%)") && mib.contains("(+2%)"), "{mib}");
        assert!(
            t.contains("published: +25..+35% (v4.17): tar of encrypted directories"),
            "{t}"
        );
    }

    #[test]
    fn the_table_has_a_change_column_marks_overlaps_and_drops_empty_rows() {
        let t = report(3, (100.0, 90.0, 110.0), (150.0, 140.0, 160.0)).to_text();
        let head = t.lines().find(|l| l.starts_with("median")).unwrap();
        assert!(
            head.starts_with("median (min-max)") && head.ends_with("change"),
            "{t}"
        );
        let mib = t.lines().find(|l| l.starts_with("MiB/s")).unwrap();
        assert!(
            mib.ends_with(" +50%"),
            "separate ranges: significant: {mib}"
        );
        let p99 = t.lines().find(|l| l.starts_with("p99 us")).unwrap();
        assert!(p99.ends_with(" ~+0%"), "overlapping ranges: {p99}");
        assert!(
            t.contains("~: noise alone would put the two variants this far apart"),
            "{t}"
        );
        assert!(
            !t.contains("IOPS") && !t.contains("queue p99"),
            "all-zero rows dropped: {t}"
        );
        let t = report(3, (100.0, 90.0, 130.0), (120.0, 110.0, 140.0)).to_text();
        let mib = t.lines().find(|l| l.starts_with("MiB/s")).unwrap();
        assert!(mib.ends_with(" ~+20%"), "{mib}");
        // 3 rounds: ranges apart are a hint only, and the notes say so;
        // 4 rounds need no such note.
        assert!(
            t.contains("3 v 3 rounds: noise alone puts two ranges apart 10% of the time, so a change without ~ is a hint, not a finding; run --rounds 4 or more."),
            "{t}"
        );
        let t = report(4, (100.0, 90.0, 130.0), (120.0, 110.0, 140.0)).to_text();
        assert!(!t.contains("a hint"), "{t}");
    }

    #[test]
    fn one_round_shows_no_range_and_says_why() {
        let t = report(1, (152.9, 152.9, 152.9), (160.0, 160.0, 160.0)).to_text();
        assert!(!t.contains("(152.9-152.9)"), "{t}");
        let mib = t.lines().find(|l| l.starts_with("MiB/s")).unwrap();
        assert!(
            mib.ends_with(" +5%"),
            "no significance mark with one round: {mib}"
        );
        assert!(t.contains("1 round: no spread"), "{t}");
        assert!(
            t.lines()
                .any(|l| l.starts_with("median ") && !l.contains("min-max"))
        );
    }

    #[test]
    fn a_round_without_a_read_or_with_trace_events_lost_is_said() {
        let rec = |reads| IntervalRecord {
            t_s: 1.0,
            interval_s: 0.25,
            reads,
            ..Default::default()
        };
        let mut t = Tally::new(2);
        t.add(
            0,
            "round 1, workers.mode = unbound",
            &[rec(10), rec(12)],
            vec![],
        );
        assert!(t.notices.is_empty(), "{:?}", t.notices);
        t.add(
            1,
            "round 1, workers.mode = bound",
            &[rec(0), rec(0)],
            vec![],
        );
        assert_eq!(t.per_variant[1].len(), 1, "the stalled round still counts");
        assert_eq!(
            t.notices,
            [
                "round 1, workers.mode = bound: no read completed in its 0.50 s window: the workload stalled (another program's threads holding its CPUs?)"
            ]
        );
        // A kernel trace that lost events is said too.
        let mut r = rec(10);
        r.kernel = Some(crate::metrics::KernelRecord {
            lost: 7,
            ..Default::default()
        });
        t.add(
            0,
            "round 2, workers.mode = unbound",
            &[r.clone(), r],
            vec![],
        );
        assert_eq!(
            t.notices.last().unwrap(),
            "round 2, workers.mode = unbound: the kernel's trace lost 14 events in its window (tracefs overruns: the tracer fell behind): its queue and item figures undercount"
        );
    }
}
