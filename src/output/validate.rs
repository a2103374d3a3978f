//! `readpath validate`: does the model predict what the kernel does?
//!
//! The model and the running kernel (`workload.target = model, kernel`)
//! run the same workload, interleaved as `compare` runs its variants, on
//! like-for-like conditions ([`like_for_like`]: the model reads the
//! kernel's own blocks on the kernel's device, pays the kernel's own
//! cipher where AF_ALG offers it, and neither side verifies where the
//! kernel has no fs-verity; the kernel's page cache is held to
//! `cache.size` by its cgroup), and every metric is given as the two
//! medians with their spread, the ratio model/kernel and a verdict
//! against a tolerance (15% by default). The verdicts are computed here,
//! never written by hand: a metric one side does not measure says so.

use serde::{Deserialize, Serialize};

use crate::metrics::table::{BIOS, THROUGHPUT};
use crate::metrics::{METRICS, Spread};
use crate::settings::{CacheDevice, Settings};
use crate::sys::Features;

use super::experiment::CompareReport;
use crate::scenario::preset::Compare;

/// The tolerance `validate` judges by unless told otherwise, %.
pub const DEFAULT_TOLERANCE_PCT: f64 = 15.0;

/// Makes `base` like for like on both targets, on a machine with
/// `features`: returns one sentence per setting changed (key, value,
/// why). Used by `validate` and by `compare --vary
/// workload.target=model,kernel`, so both compare the same things.
pub fn like_for_like(base: &mut Settings, features: &Features) -> Vec<String> {
    like_for_like_with(base, features, &crate::sys::machine_kernel())
}

/// The AES-256-XTS cipher of the model nearest the kernel's `xts(aes)`
/// `driver` in the kernel of release `release`: for Linux 6.1's
/// `xts-aes-aesni` the port of that driver's four-block loop,
/// `aes-256-xts-ni4`; its own AES instructions for another driver that
/// uses them (`xts-aes-aesni` of other releases, `xts-aes-vaes-avx512`,
/// arm64's `xts-aes-ce`); for
/// `aes-fixed-time` (`crypto/aes_ti.c` over `lib/crypto/aes.c`: byte-wise
/// S-box, arithmetic MixColumns per round) the port of that very
/// algorithm, `aes-256-xts-ti`, which pays what it pays; for
/// `aes-generic` (`crypto/aes_generic.c`, a different algorithm: 4 KiB
/// T-tables, one lookup per byte and round with MixColumns folded in) the
/// constant-time software AES `aes-256-xts-soft`, the nearest the model
/// has; None for a driver it cannot place.
pub fn nearest_cipher(driver: &str, release: &str) -> Option<&'static str> {
    let d = driver.to_ascii_lowercase();
    if d == "xts-aes-aesni"
        && crate::settings::KernelEra::of_release(release) == Some(crate::settings::KernelEra::V6_1)
    {
        Some("aes-256-xts-ni4")
    } else if d.contains("aesni")
        || d.contains("vaes")
        || d.contains("aes-ce")
        || d.contains("aes-neon")
    {
        Some("aes-256-xts")
    } else if d.contains("aes-fixed-time") {
        Some("aes-256-xts-ti")
    } else if d.contains("aes-generic") {
        Some("aes-256-xts-soft")
    } else {
        None
    }
}

/// The model's SHA-256 nearest the kernel's `sha256` driver `driver`: the
/// port of `lib/crypto/sha256.c` for `sha256-generic` (and the library
/// code under `sha256-lib`); None for one it has no like of (the SHA
/// instructions' and SIMD drivers: the kernel's own through AF_ALG then).
pub fn nearest_hash(driver: &str) -> Option<crate::verity::merkle::HashKind> {
    let d = driver.to_ascii_lowercase();
    (d == "sha256-generic" || d == "sha256-lib").then_some(crate::verity::merkle::HashKind::Generic)
}

/// [`like_for_like`] for the kernel of release `release` (`uname -r`),
/// whose features (its `xts(aes)` driver among them) are `features`: this
/// machine's or a target's.
pub fn like_for_like_with(base: &mut Settings, features: &Features, release: &str) -> Vec<String> {
    let driver = features.kernel_xts_driver.as_deref();
    let mut said = Vec::new();
    if features.kernel_target_reason.is_some() {
        // No kernel to be like: nothing to change.
        return said;
    }
    // The model follows the kernel's era (its pools, tree readahead and
    // hashing). Set as a field, not through `Settings::set`, which would
    // also supply the era's queue flags: those stay as asked (the kernel
    // runs its own queues whatever they are).
    if let Some(era) = crate::settings::KernelEra::of_release(release)
        && era != base.workers.kernel_era
    {
        base.workers.kernel_era = era;
        said.push(format!(
            "{} = {era}: the model follows the kernel's era (Linux {release}: its pools, tree readahead and hashing; the queue flags stay as set)",
            crate::key!(workers.kernel_era).name()
        ));
    }
    let mut set = |s: &mut Settings, key: &str, value: &str, why: &str| {
        if s.get(key).as_deref() != Some(value) && s.set(key, value).is_ok() {
            said.push(format!("{key} = {value}: {why}"));
        }
    };
    if base.cache.device != CacheDevice::Target {
        set(
            base,
            crate::key!(cache.device).name(),
            "target",
            "the model's bios read the kernel file's own blocks on its device (FIEMAP, O_DIRECT)",
        );
    }
    // One readahead window: the kernel's device's (a loop device's
    // default is 2560 KiB) set to the model's, or the model's to the one
    // asked of the kernel.
    match base.kernel.read_ahead_kb {
        None => {
            let kb = (base.cache.read_ahead / 1024).to_string();
            set(
                base,
                crate::key!(kernel.read_ahead_kb).name(),
                &kb,
                "the kernel's readahead window is the model's cache.read_ahead (put back after)",
            );
        }
        Some(kb) if u64::from(kb) * 1024 != base.cache.read_ahead => {
            set(
                base,
                crate::key!(cache.read_ahead).name(),
                &format!("{kb}K"),
                "the model's readahead window is the one asked of the kernel",
            );
        }
        Some(_) => {}
    }
    // One scheduling group for every thread, as the kernel's kworkers
    // have: with autogroups the model's workers share readpath's group
    // with its hogs and readers, the kernel's kworkers do not.
    if base.kernel.autogroup.is_none() && features.autogroup_reason.is_none() {
        set(
            base,
            crate::key!(kernel.autogroup).name(),
            "0",
            "the model's workers compete with the hogs and readers thread by thread, as the kernel's kworkers (in the root group) do, not inside readpath's autogroup (put back after)",
        );
    }
    // The cipher: the model's own nearest the kernel's driver where it has
    // one (the same algorithm or instructions, at the same cost: AF_ALG
    // would add a system call and a copy per data unit that the kernel's
    // work item does not pay, 1.4-2x its execution in a lab guest), else
    // the kernel's own through AF_ALG.
    let aes = base.pipeline.decrypt && base.pipeline.cipher != crate::crypto::CipherKind::Adiantum;
    if aes
        && let Some(d) = driver
        && let Some(c) = nearest_cipher(d, release)
    {
        set(
            base,
            crate::key!(pipeline.cipher).name(),
            c,
            &format!(
                "the model's AES-256-XTS nearest the kernel's driver {d} (not AF_ALG, whose system call per data unit the kernel's item does not pay)"
            ),
        );
    } else if aes && features.kernel_cipher_reason.is_none() {
        set(
            base,
            crate::key!(pipeline.cipher).name(),
            "kernel",
            &format!(
                "the kernel's own xts(aes){} through AF_ALG",
                driver.map_or(String::new(), |d| format!(
                    " ({d}: the model has no cipher like it)"
                ))
            ),
        );
    }
    // The hash likewise: the port of the kernel's generic C where that is
    // its driver (AF_ALG's `sendmsg` and `read` per block cost a lab
    // guest's verify item some 70 us the kernel's does not pay), else the
    // kernel's own through AF_ALG.
    let sha = features.kernel_sha256_driver.as_deref();
    if base.pipeline.verity
        && features.kernel_verity
        && let Some(h) = sha.and_then(nearest_hash)
    {
        set(
            base,
            crate::key!(pipeline.hash).name(),
            h.name(),
            &format!(
                "the model's SHA-256 nearest the kernel's driver {}: the same C, without AF_ALG's system calls per block",
                sha.unwrap_or_default()
            ),
        );
    } else if base.pipeline.verity
        && features.kernel_verity
        && features.kernel_hash_reason.is_none()
    {
        set(
            base,
            crate::key!(pipeline.hash).name(),
            "kernel",
            "the kernel's own sha256 through AF_ALG",
        );
    }
    if base.pipeline.verity && !features.kernel_verity {
        set(
            base,
            crate::key!(pipeline.verity).name(),
            "false",
            "this kernel has no fs-verity (CONFIG_FS_VERITY): neither side verifies",
        );
    }
    said
}

/// The metrics a kernel's rounds without tracing give: what the workload
/// itself measures (its reads, their latency, its readers' iowait), which
/// the tracepoints' own cost would understate (in a lab guest under TCG
/// by about a sixth: docs/kernel.md). The rest need the tracepoints.
pub const UNTRACED: &[&str] = &[
    "throughput_mib_s",
    "iops",
    "p50_us",
    "p99_us",
    "p999_us",
    "iowait_ms_per_s",
];

/// `cmp` (`workload.target = A, B`) with, after its two variants, one
/// round of each kernel side without tracing (`kernel.trace = false`),
/// where `base` traces: [`ValidateReport::of`] takes [`UNTRACED`]'s
/// metrics from those. Unchanged where neither side is the kernel or
/// tracing is off.
pub fn with_untraced_kernel(mut cmp: Compare, base: &Settings) -> Compare {
    if !base.kernel.trace {
        return cmp;
    }
    let kernels: Vec<String> = cmp
        .values
        .iter()
        .filter(|v| *v == "kernel")
        .cloned()
        .collect();
    if kernels.is_empty() {
        return cmp;
    }
    cmp.also = vec![Vec::new(); cmp.values.len()];
    for v in kernels {
        cmp.values.push(v);
        cmp.also.push(vec![(
            crate::key!(kernel.trace).name().to_string(),
            "false".into(),
        )]);
    }
    cmp
}

/// Metrics whose small values are judged by their difference, not their
/// ratio: (metric, the difference within which two medians are equal,
/// unit). A page hit % of 0.0 against 0.006 is the same cold stream, not a
/// ratio of 0; 0.0% of items moved against 0.2% the same placement (and
/// of items on unbound pools the same queue).
const FLOORS: &[(&str, f64, &str)] = &[
    ("page_hit_pct", 1.0, "points"),
    ("moved_pct", 1.0, "points"),
    ("unbound_pct", 1.0, "points"),
    ("highpri_pct", 1.0, "points"),
];

/// One metric, model beside kernel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// The metric's JSON name (`p99_us`).
    pub metric: String,
    /// Its title with unit (`p99 us`).
    pub label: String,
    /// The model's median and spread over its rounds.
    pub model: Spread,
    /// The kernel's.
    pub kernel: Spread,
    /// model / kernel; None where either is unmeasured or the kernel's is 0.
    pub ratio: Option<f64>,
    /// `within`, `outside`, or `unmeasured` (with why in `note`).
    pub verdict: String,
    /// Why a metric has no verdict.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// What `validate` found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ValidateReport {
    /// What the two sides are: `model` and `kernel`, or one target run
    /// twice (`kernel 1st`, `kernel 2nd`: an A/A run). A row's `model` is
    /// the first side, its `kernel` the second.
    #[serde(default = "model_and_kernel")]
    pub sides: [String; 2],
    /// The tolerance, % (a ratio within 1 +- tolerance/100 is `within`).
    pub tolerance_pct: f64,
    /// The settings made like for like, one sentence each.
    pub adjustments: Vec<String>,
    /// One row per metric.
    pub rows: Vec<Row>,
    /// Metrics within the tolerance.
    pub within: usize,
    /// Metrics outside it.
    pub outside: usize,
    /// The runs themselves (both variants' rounds, notices, machine).
    pub compare: CompareReport,
}

fn model_and_kernel() -> [String; 2] {
    ["model".into(), "kernel".into()]
}

impl ValidateReport {
    /// Whether this is one target held against itself (an A/A run).
    pub fn is_aa(&self) -> bool {
        self.compare.variants.len() >= 2
            && self.compare.variants[0].value == self.compare.variants[1].value
    }

    /// The verdicts over a `compare` of `workload.target = model, kernel`.
    pub fn of(compare: CompareReport, adjustments: Vec<String>, tolerance_pct: f64) -> Self {
        // The first variant against the second: model and kernel, or one
        // target against itself (`--pair kernel,kernel`).
        let value = |j: usize| compare.variants.get(j).map(|v| v.value.clone());
        let (m, k) = (value(0).map(|_| 0), value(1).map(|_| 1));
        // After the two sides, each kernel side's rounds without tracing,
        // in side order ([`with_untraced_kernel`]).
        let mut next = 2;
        let untraced = [0, 1].map(|j| {
            (value(j).as_deref() == Some("kernel") && compare.variants.len() > next).then(|| {
                next += 1;
                next - 1
            })
        });
        let sides = match (value(0), value(1)) {
            (Some(a), Some(b)) if a == b => [format!("{a} 1st"), format!("{b} 2nd")],
            (a, b) => [
                a.unwrap_or_else(|| "model".into()),
                b.unwrap_or_else(|| "kernel".into()),
            ],
        };
        let throughput_at = METRICS.iter().position(|m| m.name == THROUGHPUT.name);
        let throughput_at = throughput_at.expect("METRICS lists throughput");
        let mut rows = Vec::new();
        for (i, metric) in METRICS.iter().enumerate() {
            let get = |j: Option<usize>| {
                j.map(|j| compare.variants[j].metrics[i].1)
                    .unwrap_or(Spread {
                        median: f64::NAN,
                        min: f64::NAN,
                        max: f64::NAN,
                        change_pct: None,
                    })
            };
            let side = |j: usize, traced: Option<usize>| match untraced[j] {
                Some(u) if UNTRACED.contains(&metric.name) => Some(u),
                _ => traced,
            };
            // Bios per byte read does not change with the tracing's cost,
            // bios per second does: a side with untraced rounds has its
            // traced rounds' bios/s carried to its untraced throughput.
            let carried = |j: usize, traced: Option<usize>, s: Spread| match (untraced[j], traced) {
                (Some(u), Some(t)) if metric.name == BIOS.name => {
                    let mib = |v: usize| compare.variants[v].metrics[throughput_at].1.median;
                    let f = mib(u) / mib(t);
                    if f.is_finite() && f > 0.0 {
                        Spread {
                            median: s.median * f,
                            min: s.min * f,
                            max: s.max * f,
                            change_pct: None,
                        }
                    } else {
                        s
                    }
                }
                _ => s,
            };
            let model = carried(0, m, get(side(0, m)));
            let kernel = carried(1, k, get(side(1, k)));
            let mut model = model;
            let mut kernel = kernel;
            model.change_pct = None;
            kernel.change_pct = None;
            let measured = |s: &Spread| s.median.is_finite();
            let (ratio, verdict, note) = if !measured(&model) && !measured(&kernel) {
                (
                    None,
                    "unmeasured",
                    Some("neither side measured it".to_string()),
                )
            } else if !measured(&kernel) {
                (
                    None,
                    "unmeasured",
                    Some(format!("the {} does not measure it here", sides[1])),
                )
            } else if !measured(&model) {
                (
                    None,
                    "unmeasured",
                    Some(format!("the {} did not measure it", sides[0])),
                )
            } else if kernel.median == 0.0 && model.median == 0.0 {
                (Some(1.0), "within", None)
            } else if let Some(&(_, floor, unit)) =
                FLOORS.iter().find(|(name, ..)| *name == metric.name)
                && (model.median - kernel.median).abs() <= floor
            {
                (
                    (kernel.median != 0.0).then(|| model.median / kernel.median),
                    "within",
                    Some(format!(
                        "{:.2} {unit} apart: within the {floor} {unit} either can resolve",
                        (model.median - kernel.median).abs()
                    )),
                )
            } else if kernel.median == 0.0 {
                (None, "outside", Some(format!("the {}'s is 0", sides[1])))
            } else {
                let r = model.median / kernel.median;
                let ok = (r - 1.0).abs() <= tolerance_pct / 100.0 + 1e-12;
                (Some(r), if ok { "within" } else { "outside" }, None)
            };
            rows.push(Row {
                metric: metric.name.to_string(),
                label: metric.label.to_string(),
                model,
                kernel,
                ratio,
                verdict: verdict.to_string(),
                note,
            });
        }
        let count = |v: &str| rows.iter().filter(|r| r.verdict == v).count();
        ValidateReport {
            sides,
            tolerance_pct,
            adjustments,
            within: count("within"),
            outside: count("outside"),
            rows,
            compare,
        }
    }

    /// The table, for a terminal.
    pub fn to_text(&self) -> String {
        let c = &self.compare;
        let mut out = format!(
            "readpath validate: {} | {} round(s) x {:.0}s each, interleaved, {:.1}s warm-up | within {:.0}%{}\n",
            match (self.is_aa(), self.sides[0].starts_with("kernel")) {
                (false, _) => "the model against the running kernel".to_string(),
                (true, true) =>
                    "the running kernel against itself (A/A: the spread this machine's noise gives)"
                        .to_string(),
                (true, false) =>
                    "the model against itself (A/A: the spread this machine's noise gives)"
                        .to_string(),
            },
            c.rounds,
            c.duration_s,
            c.warmup_s,
            self.tolerance_pct,
            c.preset
                .as_ref()
                .map_or(String::new(), |p| format!(" | preset {p}")),
        );
        if let Some(why) = &c.ran.interrupted {
            out.push_str(&format!("INTERRUPTED: {why}\n"));
        }
        out.push_str(&format!(
            "machine: Linux {}, {} ({} CPUs)\nplan: {}\n",
            c.ran.machine.kernel,
            c.ran.machine.cpu_model,
            c.ran.machine.cpus,
            crate::engine::stages::Plan::label(&c.effective_settings)
        ));
        if !self.adjustments.is_empty() {
            out.push_str("made like for like:\n");
            for a in &self.adjustments {
                out.push_str(&format!("  {a}\n"));
            }
        }
        out.push('\n');
        let one = c.rounds <= 1;
        let cell = |s: &Spread, m: &crate::metrics::Metric| {
            if !s.median.is_finite() {
                "-".to_string()
            } else if one {
                m.cell(s.median)
            } else {
                format!("{} ({}-{})", m.cell(s.median), m.cell(s.min), m.cell(s.max))
            }
        };
        let mut lines = vec![[
            if one { "median" } else { "median (min-max)" }.to_string(),
            self.sides[0].clone(),
            self.sides[1].clone(),
            format!("{}/{}", self.sides[0], self.sides[1]),
            "verdict".to_string(),
        ]];
        for (r, m) in self.rows.iter().zip(METRICS.iter()) {
            lines.push([
                r.label.clone(),
                cell(&r.model, m),
                cell(&r.kernel, m),
                r.ratio.map_or("-".into(), |x| format!("{x:.2}x")),
                match &r.note {
                    Some(n) => format!("{} ({n})", r.verdict),
                    None => r.verdict.clone(),
                },
            ]);
        }
        let w: Vec<usize> = (0..4)
            .map(|c| {
                lines
                    .iter()
                    .map(|l| l[c].chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        for l in &lines {
            out.push_str(
                format!(
                    "{:<w0$}  {:>w1$}  {:>w2$}  {:>w3$}  {}",
                    l[0],
                    l[1],
                    l[2],
                    l[3],
                    l[4],
                    w0 = w[0],
                    w1 = w[1],
                    w2 = w[2],
                    w3 = w[3]
                )
                .trim_end(),
            );
            out.push('\n');
        }
        let judged = self.within + self.outside;
        out.push_str(&format!(
            "\n{} of {} measured metrics within {:.0}%",
            self.within, judged, self.tolerance_pct
        ));
        let outside: Vec<String> = self
            .rows
            .iter()
            .filter(|r| r.verdict == "outside")
            .map(|r| match r.ratio {
                Some(x) => format!("{} {x:.2}x", r.label),
                None => r.label.clone(),
            })
            .collect();
        if outside.is_empty() {
            out.push('\n');
        } else {
            out.push_str(&format!("; outside: {}\n", outside.join(", ")));
        }
        for v in &c.variants {
            if v.failed_reads > 0 {
                out.push_str(&format!(
                    "{}: {} reads failed (verity or I/O)\n",
                    v.value, v.failed_reads
                ));
            }
        }
        for n in &c.ran.notices {
            out.push_str(&format!("notice: {n}\n"));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spread(m: f64) -> Spread {
        Spread {
            median: m,
            min: m * 0.9,
            max: m * 1.1,
            change_pct: None,
        }
    }

    /// A `compare` of `workload.target` with no variants yet, 3 rounds.
    fn empty_report() -> CompareReport {
        serde_json::from_value(serde_json::json!({
            "version": 1, "preset": null, "key": "workload.target", "rounds": 3,
            "duration_s": 1.0, "warmup_s": 0.0,
            "settings": Settings::default(), "effective_settings": Settings::default(),
            "variants": [], "notices": [], "machine": crate::sys::MachineInfo::default(),
            "features": Features::default(), "interrupted": null
        }))
        .unwrap()
    }

    #[test]
    fn ratios_and_verdicts_are_computed_from_the_medians() {
        let mut c = empty_report();
        let metrics = |f: &dyn Fn(usize) -> f64| {
            METRICS
                .iter()
                .enumerate()
                .map(|(i, m)| (m.name.to_string(), spread(f(i))))
                .collect::<Vec<_>>()
        };
        for (value, f) in [
            (
                "model",
                &(|i: usize| {
                    if i == 0 {
                        100.0
                    } else if i == 1 {
                        130.0
                    } else {
                        10.0
                    }
                }) as &dyn Fn(usize) -> f64,
            ),
            (
                "kernel",
                &(|i: usize| {
                    if i == METRICS.len() - 2 {
                        f64::NAN
                    } else {
                        100.0
                    }
                }) as &dyn Fn(usize) -> f64,
            ),
        ] {
            c.variants.push(crate::output::experiment::VariantResult {
                value: value.into(),
                metrics: metrics(f),
                rounds: Vec::new(),
                failed_reads: 0,
            });
        }
        let r = ValidateReport::of(c, vec![], 15.0);
        assert_eq!(r.rows[0].ratio, Some(1.0));
        assert_eq!(r.rows[0].verdict, "within");
        assert_eq!(r.rows[1].verdict, "outside", "1.30x");
        assert!((r.rows[1].ratio.unwrap() - 1.3).abs() < 1e-9);
        assert_eq!(r.rows[2].verdict, "outside", "0.10x");
        let n = METRICS.len() - 2;
        assert_eq!(r.rows[n].verdict, "unmeasured");
        assert_eq!(r.within, 1);
        assert_eq!(r.outside, METRICS.len() - 2);
        let text = r.to_text();
        assert!(
            text.contains(&format!(
                "1 of {} measured metrics within 15%",
                METRICS.len() - 1
            )),
            "{text}"
        );
        assert!(text.contains("IOPS 1.30x"), "{text}");
        // Page hit % is judged by points: 0.0 against 0.006 is equal,
        // 22.4 against 14.5 is not.
        let hit = METRICS
            .iter()
            .position(|m| m.name == "page_hit_pct")
            .unwrap();
        for (m, k, want) in [
            (0.0, 0.006, "within"),
            (22.4, 14.5, "outside"),
            (50.0, 50.9, "within"),
        ] {
            let mut c = r.compare.clone();
            c.variants[0].metrics[hit].1 = spread(m);
            c.variants[1].metrics[hit].1 = spread(k);
            let v = ValidateReport::of(c, vec![], 15.0);
            assert_eq!(v.rows[hit].verdict, want, "{m} vs {k}: {:?}", v.rows[hit]);
        }
        // One target against itself (`--pair kernel,kernel`): the first
        // run against the second, named so, with the same verdicts.
        let mut aa = r.compare.clone();
        aa.variants[0].value = "kernel".into();
        let v = ValidateReport::of(aa, vec![], 15.0);
        assert!(v.is_aa());
        assert_eq!(
            v.sides,
            ["kernel 1st".to_string(), "kernel 2nd".to_string()]
        );
        assert_eq!(v.rows[1].ratio, r.rows[1].ratio);
        let text = v.to_text();
        assert!(text.contains("the running kernel against itself"), "{text}");
        assert!(text.contains("kernel 1st/kernel 2nd"), "{text}");
        assert!(!r.is_aa() && r.to_text().contains("model/kernel"));
    }

    /// The kernel's MiB/s, IOPS, latency and iowait come from its rounds
    /// without tracing, its queue figures from the traced ones; the same
    /// for both sides of the kernel's A/A.
    #[test]
    fn the_kernels_headline_figures_come_from_its_untraced_rounds() {
        let base = Settings::default();
        assert!(base.kernel.trace, "tracing is the default");
        let cmp = Compare::parse_vary("workload.target=model,kernel", &base).unwrap();
        let cmp = with_untraced_kernel(cmp, &base);
        assert_eq!(cmp.values, ["model", "kernel", "kernel"]);
        assert_eq!(cmp.label(2), "kernel (kernel.trace = false)");
        let v = cmp.variants(&base).unwrap();
        assert!(v[1].kernel.trace && !v[2].kernel.trace);
        assert_eq!(v[1].workload.target, v[2].workload.target);
        // Untraced already, or no kernel: nothing added.
        let mut off = base.clone();
        off.kernel.trace = false;
        let plain = Compare::parse_vary("workload.target=model,kernel", &off).unwrap();
        assert_eq!(with_untraced_kernel(plain.clone(), &off), plain);
        let models = Compare::parse_vary("workload.target=model,model", &base).unwrap();
        assert_eq!(with_untraced_kernel(models.clone(), &base), models);
        let aa = with_untraced_kernel(
            Compare::parse_vary("workload.target=kernel,kernel", &base).unwrap(),
            &base,
        );
        assert_eq!(aa.values.len(), 4);
        // Each variant's every metric is its index + 1: a row shows which
        // variant each side's figure came from.
        let report = |cmp: &Compare| {
            let mut c = empty_report();
            for i in 0..cmp.values.len() {
                c.variants.push(crate::output::experiment::VariantResult {
                    value: cmp.values[i].clone(),
                    metrics: METRICS
                        .iter()
                        .map(|m| (m.name.to_string(), spread(i as f64 + 1.0)))
                        .collect(),
                    rounds: Vec::new(),
                    failed_reads: 0,
                });
            }
            ValidateReport::of(c, vec![], 15.0)
        };
        let from = |r: &ValidateReport, name: &str| {
            let row = r.rows.iter().find(|r| r.metric == name).unwrap();
            (row.model.median, row.kernel.median)
        };
        let r = report(&cmp);
        assert_eq!(from(&r, "throughput_mib_s"), (1.0, 3.0));
        assert_eq!(from(&r, "p99_us"), (1.0, 3.0));
        assert_eq!(from(&r, "iowait_ms_per_s"), (1.0, 3.0));
        assert_eq!(from(&r, "queue_p99_us"), (1.0, 2.0));
        assert_eq!(from(&r, "run_delay_ms_per_s"), (1.0, 2.0));
        // Bios counted traced (2 at 2 MiB/s), carried to the untraced
        // rounds' 3 MiB/s; the model's as it ran.
        assert_eq!(from(&r, "bios_per_s"), (1.0, 3.0));
        let r = report(&aa);
        assert_eq!(from(&r, "bios_per_s"), (3.0, 4.0));
        assert!(r.is_aa());
        assert_eq!(from(&r, "p50_us"), (3.0, 4.0));
        assert_eq!(from(&r, "exec_p50_us"), (1.0, 2.0));
        // Without the untraced rounds, every figure from the two sides.
        let two = Compare::parse_vary("workload.target=model,kernel", &base).unwrap();
        assert_eq!(from(&report(&two), "throughput_mib_s"), (1.0, 2.0));
    }

    /// [`like_for_like_with`] for a kernel whose `xts(aes)` driver is `driver`.
    fn with_driver(
        s: &mut Settings,
        f: &Features,
        driver: Option<&str>,
        release: &str,
    ) -> Vec<String> {
        let f = Features {
            kernel_xts_driver: driver.map(String::from),
            ..f.clone()
        };
        like_for_like_with(s, &f, release)
    }

    #[test]
    fn like_for_like_reads_the_kernels_device_and_drops_verity_it_lacks() {
        let mut s = Settings::default();
        let f = Features {
            kernel_verity: false,
            kernel_target_reason: None,
            kernel_cipher_reason: Some("no AF_ALG".into()),
            kernel_hash_reason: Some("no AF_ALG".into()),
            ..Features::default()
        };
        let said = with_driver(&mut s, &f, Some("xts(ecb(aes-fixed-time))"), "6.18.44");
        assert_eq!(s.cache.device, CacheDevice::Target);
        assert!(!s.pipeline.verity);
        assert_eq!(s.pipeline.cipher, crate::crypto::CipherKind::Aes256XtsTi);
        assert_eq!(said.len(), 5, "{said:?}");
        assert!(said[0].starts_with("cache.device = target"), "{said:?}");
        assert_eq!(s.kernel.read_ahead_kb, Some(128), "{said:?}");
        assert_eq!(s.kernel.autogroup, Some(0), "{said:?}");
        // Again: nothing left to change.
        assert!(with_driver(&mut s, &f, Some("xts(ecb(aes-fixed-time))"), "6.18.44").is_empty());
        assert_eq!(
            nearest_cipher("xts-aes-vaes-avx512", "6.18.44"),
            Some("aes-256-xts")
        );
        assert_eq!(
            nearest_cipher("xts-aes-aesni", "6.18.44"),
            Some("aes-256-xts")
        );
        assert_eq!(
            nearest_cipher("xts-aes-aesni", "6.1.192"),
            Some("aes-256-xts-ni4"),
            "Linux 6.1's driver: its loop, ported"
        );
        assert_eq!(
            nearest_cipher("xts-aes-aesni", "4.19.0"),
            Some("aes-256-xts")
        );
        assert_eq!(
            nearest_cipher("xts(ecb(aes-generic))", "6.18.44"),
            Some("aes-256-xts-soft")
        );
        assert_eq!(
            nearest_cipher("xts(ecb(aes-fixed-time))", "6.18.44"),
            Some("aes-256-xts-ti")
        );
        assert_eq!(nearest_cipher("xts-aes-mystery", "6.1.192"), None);
        // With AF_ALG too, the model's own cipher where it has one like
        // the kernel's driver (no system call per data unit, as the
        // kernel's item has none); the kernel's own through AF_ALG where
        // it has none.
        let mut s = Settings::default();
        s.set("pipeline.cipher", "aes-256-xts-soft").unwrap();
        let f = Features {
            kernel_cipher_reason: None,
            ..f
        };
        let said = with_driver(&mut s, &f, Some("xts-aes-vaes-avx512"), "6.18.44");
        assert_eq!(s.pipeline.cipher, crate::crypto::CipherKind::Aes256Xts);
        assert!(said.iter().any(|l| l.contains("not AF_ALG")), "{said:?}");
        let mut s = Settings::default();
        with_driver(&mut s, &f, Some("xts-aes-mystery"), "6.18.44");
        assert_eq!(s.pipeline.cipher, crate::crypto::CipherKind::Kernel);
        // The hash: the port of the kernel's generic C where that is its
        // driver, else the kernel's own through AF_ALG.
        use crate::verity::merkle::HashKind;
        let verity = |sha: &str| Features {
            kernel_verity: true,
            kernel_hash_reason: None,
            kernel_sha256_driver: Some(sha.into()),
            ..f.clone()
        };
        let mut s = Settings::default();
        let said = with_driver(&mut s, &verity("sha256-generic"), None, "6.1.192");
        assert_eq!(s.pipeline.hash, HashKind::Generic);
        assert!(
            said.iter()
                .any(|l| l.starts_with("pipeline.hash = generic") && l.contains("sha256-generic")),
            "{said:?}"
        );
        let mut s = Settings::default();
        with_driver(&mut s, &verity("sha256-ni"), None, "6.1.192");
        assert_eq!(s.pipeline.hash, HashKind::Kernel);
        assert_eq!(nearest_hash("sha256-avx2"), None);
        // Where autogroups cannot be turned, they are left alone.
        let mut s = Settings::default();
        let f = Features {
            autogroup_reason: Some("no CONFIG_SCHED_AUTOGROUP".into()),
            ..f
        };
        with_driver(&mut s, &f, None, "6.18.44");
        assert_eq!(s.kernel.autogroup, None);
        // Where the kernel target cannot run, the device stays.
        let mut s = Settings::default();
        let f = Features {
            kernel_verity: true,
            kernel_target_reason: Some("not root".into()),
            kernel_cipher_reason: Some("no AF_ALG".into()),
            ..Features::default()
        };
        assert!(with_driver(&mut s, &f, None, "6.18.44").is_empty());
    }

    #[test]
    fn the_model_follows_the_kernels_era_with_the_queue_flags_as_asked() {
        use crate::settings::{KernelEra, VerifyMode};
        let f = Features::default();
        let mut s = Settings::default();
        s.workers.verify_mode = VerifyMode::Unbound;
        let said = with_driver(&mut s, &f, None, "6.1.192");
        assert_eq!(s.workers.kernel_era, KernelEra::V6_1);
        assert_eq!(s.workers.verify_mode, VerifyMode::Unbound, "as asked");
        assert!(said[0].starts_with("workers.kernel_era = 6.1"), "{said:?}");
        for (release, era) in [
            ("6.1.0-57-cloud-amd64", Some(KernelEra::V6_1)),
            ("4.19.325", Some(KernelEra::V4_19)),
            ("5.15.178-android13-8", Some(KernelEra::V5_15Android)),
            ("5.15.0-91-generic", None),
            ("6.6.30", None),
            ("6.18.44-fc-v1272", Some(KernelEra::V6_18)),
            ("7.0.1", Some(KernelEra::V6_18)),
            ("unknown kernel", None),
        ] {
            assert_eq!(KernelEra::of_release(release), era, "{release}");
        }
        // A series without an era leaves the model's as it was.
        let mut s = Settings::default();
        with_driver(&mut s, &f, None, "6.6.30");
        assert_eq!(s.workers.kernel_era, KernelEra::V6_18);
    }
}
