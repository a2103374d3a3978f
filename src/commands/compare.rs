//! `readpath compare`: variants of one setting run interleaved (A B A B
//! ...) and one table printed, here, on `--remote`'s target, or on several
//! machines at once (`--hosts`), one column group each. Every variant is
//! checked before anything runs.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::cli::{Format, RemoteArgs, SettingsArgs, TraceArgs};
use crate::invocation::{BadInput, bad_input, load_settings_for, say};
use crate::output::experiment::{CompareOptions, HostResult, HostsReport};
use crate::remote::transport::Remote;
use crate::scenario::preset::{Compare, Preset};
use crate::settings::Settings;

use super::outputs::{
    TraceSink, check_output, emit, open_output, output_error, preset_input, recording_error,
    round_progress, say_raw,
};
use super::prepare::{prepare_dataset, progress_reporter};
use super::target::{remote_spec, start_remote};
use super::{RemoteLost, engine_error};

/// `readpath compare`: `hosts` is `--hosts` (or `--remote`) with the
/// options that say how to reach the targets.
pub(super) fn compare(
    args: &SettingsArgs,
    vary: Option<&str>,
    (record, trace): (Option<&Path>, &TraceArgs),
    hosts: Option<(&str, RemoteArgs)>,
    opts: CompareOptions,
    format: Format,
) -> Result<()> {
    // The hosts are checked before anything runs.
    let hosts = match hosts {
        Some((list, ra)) => {
            let flag = match (record, &trace.trace) {
                (Some(_), _) => Some("--record"),
                (None, Some(_)) => Some("--trace"),
                (None, None) => None,
            };
            Some((parse_hosts(list, flag)?, ra))
        }
        None => None,
    };
    // With targets only, they validate the settings (their CPUs, their
    // kernel); here only the ranges are checked.
    let here = hosts
        .as_ref()
        .is_none_or(|(h, _)| h.iter().any(Option::is_none));
    let cpus = if here {
        crate::sys::online_cpus().len()
    } else {
        crate::settings::MAX_CPU_NUMBER + 1
    };
    // Lab kernels, one with a seed reverted: the seed before and after.
    // Each host's reverted seed, read once from its kernel.toml.
    let reverts: Vec<Option<&'static crate::lab::build::Seed>> = match &hosts {
        Some((h, _)) => h
            .iter()
            .map(|host| reverted(&opts.engine.data_dir, host.as_ref()))
            .collect(),
        None => Vec::new(),
    };
    let seed = match &hosts {
        Some((h, _)) => seed_of(h, &reverts)?,
        None => None,
    };
    if let Some(s) = seed
        && vary.is_some()
    {
        return Err(BadInput(format!(
            "compare --hosts: kernels with and without seed {} run the kernel target and the model on each; --vary has no place here",
            s.name
        ))
        .into());
    }
    let preset_name = args.preset.as_deref().or(seed.map(|s| s.preset));
    let (mut settings, preset) = load_settings_for(preset_name, &args.set, cpus)?;
    let cmp = match seed {
        Some(_) => Compare::of(
            crate::key!(workload.target).name(),
            vec!["kernel".into(), "model".into()],
        ),
        None => what_varies(vary, preset.as_ref(), &settings)?,
    };
    // Model against kernel: on like-for-like conditions, as `validate`.
    let like = if here
        && cmp.key == crate::key!(workload.target).name()
        && cmp.values.iter().any(|v| v == "model")
        && cmp.values.iter().any(|v| v == "kernel")
    {
        crate::output::validate::like_for_like(&mut settings, &crate::sys::probe_features())
    } else {
        Vec::new()
    };
    // Each host's settings: the seed's setting as that host's kernel has it.
    let plans: Vec<Settings> = match (&hosts, seed) {
        (Some(_), Some(sd)) => reverts
            .iter()
            .map(|r| {
                let mut s = settings.clone();
                let value = if r.is_some() {
                    sd.setting.1
                } else {
                    sd.setting.2
                };
                s.set(sd.setting.0, value)
                    .map_err(|e| BadInput(e.to_string()))?;
                Ok(s)
            })
            .collect::<Result<_>>()?,
        (Some((h, _)), None) => vec![settings.clone(); h.len()],
        _ => Vec::new(),
    };
    for p in plans.iter().chain(plans.is_empty().then_some(&settings)) {
        check_variants(p, &cmp, cpus, here)?;
    }
    // The preset's published result, when this is its own comparison.
    let published = preset.as_ref().and_then(|p| published_for(p, &cmp));
    let total = cmp.values.len() as u32 * opts.rounds;
    let tty = std::io::stderr().is_terminal();
    let mut progress = round_progress("compare", opts.rounds, |round, i| {
        format!(
            "{} = {} ({} of {total})",
            cmp.key,
            cmp.values[i],
            round * cmp.values.len() as u32 + i as u32 + 1,
        )
    });
    let inputs: Vec<PathBuf> = preset_input(args).into_iter().collect();
    let record = match record {
        Some(p) => Some(check_output(
            "--record",
            p,
            &inputs,
            Some(&opts.engine.data_dir),
        )?),
        None => None,
    };
    let trace_out = match &trace.trace {
        Some(p) => Some(check_output(
            "--trace",
            p,
            &inputs,
            Some(&opts.engine.data_dir),
        )?),
        None => None,
    };
    if let (Some(a), Some(b)) = (&record, &trace_out) {
        a.check_distinct(b).map_err(output_error)?;
    }
    crate::sys::install_stop_handlers();
    // Opened before the workload starts (a FIFO waits for its reader here),
    // then the dataset made: both end on a stop signal.
    let traces = trace.traces();
    let record = open_output(record.as_ref())?;
    let trace = TraceSink::open(trace_out.as_ref(), trace.trace_max)?;
    if traces {
        // The workload's spans go to the trace and the recording.
        crate::metrics::set_tracing(true);
    }
    if here {
        prepare_dataset(&opts.engine.data_dir, &settings)?;
    }
    if let Some((hosts, ra)) = hosts {
        // Lab guests say how they run themselves (one at a time).
        if tty && !hosts.iter().flatten().any(|h| matches!(h, Remote::Vm(_))) {
            say(
                "readpath: compare --hosts: the hosts run at the same time; each says when it is done",
            );
        }
        // One target: its intervals to the recording and the trace.
        let mut one = TargetOutputs {
            record,
            trace: trace.map(TraceSink::into_writer),
            traces,
        };
        let mut report = compare_hosts(
            &plans,
            &cmp,
            preset.map(|p| p.name),
            (&hosts, &ra),
            &opts,
            &mut one,
        )?;
        if let Some(t) = one.trace.take() {
            TraceSink::of(t).finish()?;
        }
        if let Some(p) = &published {
            for h in &mut report.hosts {
                if let Some(r) = h.report.as_mut() {
                    r.judge(p.clone());
                }
            }
        }
        if let Some(sd) = seed {
            let before: Vec<String> = hosts
                .iter()
                .zip(&reverts)
                .filter(|(_, r)| r.is_some())
                .filter_map(|(h, _)| h.as_ref().map(Remote::label))
                .collect();
            report.seed = Some(crate::output::experiment::SeedVerdict::of(
                sd.facts(),
                &report,
                |h| before.iter().any(|b| b == h),
            ));
        }
        emit(format, &report, || report.to_text())?;
        let failed = report.hosts.iter().any(|h| h.error.is_some());
        return if failed {
            Err(RemoteLost("one or more hosts have no complete result (see above)".into()).into())
        } else {
            Ok(())
        };
    }
    let mut ds_progress = progress_reporter();
    let mut trace = trace.map(TraceSink::into_writer);
    let report = crate::output::experiment::run(
        &settings,
        &cmp,
        preset.map(|p| p.name),
        &opts,
        &mut progress,
        &mut ds_progress,
        record,
        &mut trace,
    );
    if tty {
        say_raw("\r\x1b[K");
    }
    if let Some(t) = trace {
        TraceSink::of(t).finish()?;
    }
    let mut report = report.map_err(engine_error)?;
    if let Some(p) = published {
        report.judge(p);
    }
    for (i, a) in like.into_iter().enumerate() {
        report
            .ran
            .notices
            .insert(i, format!("made like for like (model vs kernel): {a}"));
    }
    emit(format, &report, || report.to_text())
}

/// The preset's published result when `cmp` is the preset's own
/// comparison (its key, its first two values in its order).
pub(super) fn published_for(
    preset: &Preset,
    cmp: &Compare,
) -> Option<crate::scenario::preset::Published> {
    let own = preset.compare.as_ref()?;
    (own.key == cmp.key && cmp.values.len() >= 2 && own.values[..2] == cmp.values[..2])
        .then(|| preset.published.clone())
        .flatten()
}

/// `--hosts local,ssh:HOST,...`: each parsed (`None` is this machine),
/// none twice, 1 to 8 of them; `--record` and `--trace` (`one_machine`)
/// refused beside more than one, or beside `local` (`compare` without
/// --hosts runs here).
fn parse_hosts(list: &str, one_machine: Option<&str>) -> Result<Vec<Option<Remote>>> {
    let mut out: Vec<Option<Remote>> = Vec::new();
    for h in list.split(',').map(str::trim) {
        let host = if h == "local" {
            None
        } else {
            Some(Remote::parse(h).map_err(|e| BadInput(format!("--hosts: {e}; or local")))?)
        };
        if out.contains(&host) {
            return Err(BadInput(format!("--hosts: {h} is named twice")).into());
        }
        out.push(host);
    }
    if !(1..=8).contains(&out.len()) {
        return Err(BadInput(format!("--hosts: {} hosts; allowed 1..=8", out.len())).into());
    }
    if let Some(flag) = one_machine
        && !matches!(out.as_slice(), [Some(_)])
    {
        return Err(BadInput(format!(
            "compare --hosts: {flag} is for one machine; run each host apart (`compare --remote HOST {flag} FILE`)"
        ))
        .into());
    }
    // A lab guest's kernel is found (its data dir trusted, a bzImage path
    // read) by `Remote::parse`, so a bad one is refused here, before a
    // local round or a dataset is made (`--hosts local,vm:../../etc` had
    // run the local round and prepared 256 MB first). An ssh or adb host
    // is checked when it is started, which is before anything runs too.
    Ok(out)
}

/// The setting varied and its values: `--vary`, else the preset's
/// `[compare]` table.
pub(super) fn what_varies(
    vary: Option<&str>,
    preset: Option<&Preset>,
    settings: &Settings,
) -> Result<Compare> {
    match (vary, preset.and_then(|p| p.compare.clone())) {
        (Some(v), _) => Ok(Compare::parse_vary(v, settings).map_err(bad_input)?),
        (None, Some(c)) => Ok(c),
        (None, None) => Err(BadInput(
            "compare: nothing to vary: give --vary KEY=V1,V2 (e.g. --vary workers.mode=unbound,bound) or a --preset with a [compare] table".into(),
        )
        .into()),
    }
}

/// Every variant must be valid before anything runs: its ranges, and when
/// it runs `here`, this machine's features and memory.
pub(super) fn check_variants(
    settings: &Settings,
    cmp: &Compare,
    cpus: usize,
    here: bool,
) -> Result<()> {
    let features = crate::sys::probe_features();
    for v in cmp
        .variants(settings)
        .map_err(|e| BadInput(e.to_string()))?
    {
        v.validate(cpus).map_err(|e| BadInput(e.to_string()))?;
        if !here {
            continue;
        }
        let r = crate::engine::resolve(&v, &features, &crate::engine::DataFs::capable())
            .map_err(engine_error)?;
        crate::engine::memory::check_fits(&r.effective).map_err(|e| {
            BadInput(format!(
                "{} = {}: {e}",
                cmp.key,
                v.get(&cmp.key).unwrap_or_default()
            ))
        })?;
    }
    Ok(())
}

/// `compare --hosts`: every target started first (checked, its binary
/// copied), then the experiment on all hosts at once, each interleaving
/// its variants; a host that fails or loses its connection is reported
/// with why, beside the others' results.
/// A single target's outputs (`compare --remote HOST --record FILE
/// --trace FILE --timeline`): the recording's output until its header (the
/// target's) is written, the trace, and whether the target traces.
struct TargetOutputs {
    record: Option<crate::files::OutputFile>,
    trace: Option<crate::output::experiment::TraceFile>,
    traces: bool,
}

fn compare_hosts(
    plans: &[Settings],
    cmp: &Compare,
    preset: Option<String>,
    (hosts, ra): (&[Option<Remote>], &RemoteArgs),
    opts: &CompareOptions,
    one: &mut TargetOutputs,
) -> Result<HostsReport> {
    let spec_for = |settings: &Settings| -> Result<crate::remote::client::StartSpec> {
        let first = cmp
            .variants(settings)
            .map_err(|e| BadInput(e.to_string()))?
            .remove(0);
        let mut spec = remote_spec(
            &SettingsArgs {
                preset: None,
                set: Vec::new(),
            },
            "compare",
            opts.engine.interval,
            ra,
        )?;
        spec.settings = Some(first);
        Ok(spec)
    };
    let mut results: Vec<HostResult> = Vec::new();
    // Lab guests share this machine's CPUs: at the same time each would
    // take the other's, so they run one after the other, each booted just
    // before its turn.
    let guests = hosts.iter().flatten().any(|h| matches!(h, Remote::Vm(_)));
    if let [Some(h)] = hosts {
        // One target (`--remote vm:K`, `--remote ssh:HOST`): it runs every
        // round of every variant, interleaved (a lab guest in one boot, a
        // switch flipped between them on a kernel with readpath's lab
        // switches), its intervals recorded and traced here.
        let settings = &plans[0];
        let label = h.label();
        let started = spec_for(settings)
            .and_then(|spec| start_remote(h.clone(), spec))
            .and_then(|mut w| {
                let mut out = crate::output::experiment::Outputs::default();
                if one.traces {
                    crate::engine::workload::Workload::trace(&mut w, true)
                        .map_err(|why| anyhow::anyhow!("{}: the trace: {why}", w.place_name()))?;
                }
                if let Some(o) = one.record.take() {
                    // The target's header, naming the preset the
                    // experiment ran (its settings went as settings).
                    w.header.preset = preset.clone();
                    out.recording = Some(
                        crate::output::recording::Writer::start(o, &w.header)
                            .map_err(recording_error)?,
                    );
                }
                out.trace = one.trace.take();
                Ok((w, out))
            });
        results = vec![match started {
            Ok((w, mut out)) => {
                let r = on_target(label, w, settings, cmp, preset.clone(), opts, &mut out);
                one.trace = out.trace.take();
                if let Some(w) = out.recording.take() {
                    w.finish().map_err(recording_error)?;
                }
                r
            }
            // An ssh or adb target that refuses to start (its check, the
            // settings against its CPUs) ends the command as it says
            // (exit 2 for bad input); a guest's boot failing is its result.
            Err(e) if !matches!(h, Remote::Vm(_)) => return Err(e),
            Err(e) => HostResult {
                host: label,
                report: None,
                error: Some(crate::invocation::error_message(&e)),
            },
        }];
    } else if guests {
        results = rounds_in_turn(plans, cmp, &preset, hosts, &spec_for, opts);
    } else {
        // Start the remote ones (each checks its target and copies readpath).
        let mut started = Vec::new();
        for (h, settings) in hosts.iter().zip(plans) {
            if let Some(h) = h {
                started.push((
                    h.label(),
                    start_remote(h.clone(), spec_for(settings)?)?,
                    settings,
                ));
            }
        }
        let local = hosts
            .iter()
            .zip(plans)
            .find(|(h, _)| h.is_none())
            .map(|(_, s)| s);
        std::thread::scope(|sc| -> Result<()> {
            let mut threads = Vec::new();
            for (label, w, settings) in started {
                let preset = preset.clone();
                threads.push(sc.spawn(move || {
                    let mut none = crate::output::experiment::Outputs::default();
                    on_target(label, w, settings, cmp, preset, opts, &mut none)
                }));
            }
            if let Some(settings) = local {
                results.push(on_local(settings, cmp, preset.clone(), opts));
            }
            for t in threads {
                if let Ok(r) = t.join() {
                    results.push(r);
                }
            }
            Ok(())
        })?;
    }
    // In the order given.
    let order = |h: &HostResult| {
        hosts
            .iter()
            .position(|x| x.as_ref().map_or("local".to_string(), |r| r.label()) == h.host)
            .unwrap_or(usize::MAX)
    };
    results.sort_by_key(order);
    Ok(HostsReport {
        version: crate::output::experiment::REPORT_VERSION,
        hosts: results,
        seed: None,
        one_at_a_time: guests,
    })
}

/// `compare --hosts` with lab guests: they share this machine's CPUs, so
/// one runs at a time, and round by round (A B A B ...: each round boots
/// every guest afresh and runs one round of the experiment there), so a
/// drift of this machine and the spread from boot to boot fall on every
/// host alike; each host's rounds are then merged into one report.
fn rounds_in_turn(
    plans: &[Settings],
    cmp: &Compare,
    preset: &Option<String>,
    hosts: &[Option<Remote>],
    spec_for: &dyn Fn(&Settings) -> Result<crate::remote::client::StartSpec>,
    opts: &CompareOptions,
) -> Vec<HostResult> {
    say(&format!(
        "readpath: compare --hosts: lab guests run one at a time, round by round ({} rounds x {} hosts, each guest booted afresh per round): at the same time they would share this machine's CPUs",
        opts.rounds,
        hosts.len()
    ));
    let one = CompareOptions {
        rounds: 1,
        ..opts.clone()
    };
    let mut parts: Vec<Vec<crate::output::experiment::CompareReport>> =
        vec![Vec::new(); hosts.len()];
    let mut errors: Vec<Option<String>> = vec![None; hosts.len()];
    let started = std::time::Instant::now();
    'rounds: for round in 0..opts.rounds {
        for (i, (h, settings)) in hosts.iter().zip(plans).enumerate() {
            if crate::sys::stop_requested() {
                break 'rounds;
            }
            if errors[i].is_some() {
                continue;
            }
            let label = h.as_ref().map_or("local".to_string(), Remote::label);
            let done = round as usize * hosts.len() + i;
            say(&format!(
                "readpath: round {}/{}: {label} ({})",
                round + 1,
                opts.rounds,
                crate::output::format::eta_text(
                    started.elapsed(),
                    done,
                    opts.rounds as usize * hosts.len(),
                    None
                )
            ));
            let r = match h {
                Some(r) => {
                    match spec_for(settings).and_then(|spec| start_remote(r.clone(), spec)) {
                        Ok(w) => on_target(
                            label.clone(),
                            w,
                            settings,
                            cmp,
                            preset.clone(),
                            &one,
                            &mut crate::output::experiment::Outputs::default(),
                        ),
                        Err(e) => HostResult {
                            host: label.clone(),
                            report: None,
                            error: Some(crate::invocation::error_message(&e)),
                        },
                    }
                }
                None => on_local(settings, cmp, preset.clone(), &one),
            };
            if let Some(rep) = r.report {
                parts[i].push(rep);
            }
            if let Some(e) = r.error {
                errors[i] = Some(format!("round {}: {e}", round + 1));
            }
        }
    }
    hosts
        .iter()
        .zip(parts)
        .zip(errors)
        .map(|((h, p), error)| HostResult {
            host: h.as_ref().map_or("local".to_string(), Remote::label),
            report: crate::output::experiment::merge_rounds(cmp, p),
            error,
        })
        .collect()
}

/// The seed reverted in lab guest `host`'s kernel, if it is one built
/// with `lab build --revert`.
fn reverted(data_dir: &Path, host: Option<&Remote>) -> Option<&'static crate::lab::build::Seed> {
    let Some(Remote::Vm(v)) = host else {
        return None;
    };
    let k = crate::lab::kernels::open(data_dir, &v.kernel).ok()?;
    crate::lab::build::SEEDS
        .iter()
        .find(|s| s.name == k.info.reverted)
}

/// `--hosts` naming lab kernels of which some have a seed reverted
/// (`reverts`, one per host): that
/// seed (each host then runs the kernel target and the model, the model
/// with the seed's setting as the host's kernel has it). Refused: two
/// seeds, a local or remote host beside them, or no kernel with the seed.
fn seed_of(
    hosts: &[Option<Remote>],
    reverts: &[Option<&'static crate::lab::build::Seed>],
) -> Result<Option<&'static crate::lab::build::Seed>> {
    let seeds: Vec<_> = reverts.iter().flatten().copied().collect();
    let Some(first) = seeds.first().copied() else {
        return Ok(None);
    };
    if seeds.iter().any(|s| s.name != first.name) {
        return Err(BadInput(format!(
            "compare --hosts: the lab kernels have different seeds reverted ({}); compare one seed at a time",
            seeds.iter().map(|s| s.name).collect::<Vec<_>>().join(", ")
        ))
        .into());
    }
    if hosts.iter().any(|h| !matches!(h, Some(Remote::Vm(_)))) {
        return Err(BadInput(format!(
            "compare --hosts: seed {} is compared on lab kernels only (vm:KERNEL); a local or remote host has a different kernel, CPUs and disk",
            first.name
        ))
        .into());
    }
    if seeds.len() == hosts.len() {
        return Err(BadInput(format!(
            "compare --hosts: every kernel has seed {} reverted; name one with it too (e.g. vm:6.1, from `readpath lab build`)",
            first.name
        ))
        .into());
    }
    Ok(Some(first))
}

/// One target's part of `compare --hosts`, on a thread of its own: its
/// report, or why it has none (a lost connection beside a report).
fn on_target(
    label: String,
    mut w: crate::remote::client::RemoteWorkload,
    settings: &Settings,
    cmp: &Compare,
    preset: Option<String>,
    opts: &CompareOptions,
    out: &mut crate::output::experiment::Outputs,
) -> HostResult {
    let mut none = |_: u32, _: usize| {};
    let r = crate::output::experiment::run_on(&mut w, settings, cmp, preset, opts, &mut none, out);
    let finished = w.finish();
    // The intervals that came after the last round's (the final one).
    for rec in &finished.rest {
        out.record(rec);
    }
    let summary = finished.summary;
    say(&format!("readpath: {label}: done"));
    let (report, error) = match r {
        Ok(rep) => (Some(rep), summary.err().map(|e| format!("connection: {e}"))),
        Err(e) => (None, Some(e.to_string())),
    };
    HostResult {
        host: label,
        report,
        error,
    }
}

/// This machine's part of `compare --hosts` (`local`).
fn on_local(
    settings: &Settings,
    cmp: &Compare,
    preset: Option<String>,
    opts: &CompareOptions,
) -> HostResult {
    let mut quiet = |_: u32, _: usize| {};
    let mut ds = progress_reporter();
    let r = crate::output::experiment::run(
        settings, cmp, preset, opts, &mut quiet, &mut ds, None, &mut None,
    );
    say("readpath: local: done");
    match r {
        Ok(rep) => HostResult {
            host: "local".into(),
            report: Some(rep),
            error: None,
        },
        Err(e) => HostResult {
            host: "local".into(),
            report: None,
            error: Some(e.to_string()),
        },
    }
}
