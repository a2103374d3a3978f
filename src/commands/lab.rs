//! `readpath lab`: the kernel lab's kernels listed with what each keeps
//! on disk, fetched, built, benchmarked, booted to run a command, and
//! removed (see [`crate::lab`]).

use std::path::Path;

use anyhow::Result;

use crate::cli::LabAction;
use crate::invocation::{BadInput, bad_input, say};
use crate::lab::{build, kernels, store};
use crate::metrics::format::human_bytes;

use super::outputs::print_text;

/// `readpath lab ...`. The data dir must pass the trust rule first
/// (bad input otherwise): nothing in a refused one is read or opened.
pub(super) fn lab(data_dir: &Path, action: LabAction) -> Result<()> {
    crate::dataset::check_data_dir(data_dir).map_err(|e| BadInput(e.to_string()))?;
    match action {
        LabAction::Kernels => {
            let have = kernels::list(data_dir)?;
            let mut out = format!(
                "lab kernels in {} (boot one with --remote vm:NAME):\n",
                kernels::lab_dir(data_dir).display()
            );
            if have.is_empty() {
                out.push_str("  none yet\n");
            }
            let mut imports = (0usize, 0u64);
            for k in &have {
                let u = store::usage(data_dir, &k.info.name);
                out.push_str(&format!(
                    "  {:<24} Linux {} ({}){}\n  {:<24} {} on disk (kernel {}, guest disk {}, initramfs and logs {}), {}\n",
                    k.info.name,
                    k.info.release,
                    k.info.source,
                    if k.modules().is_some() {
                        ", with modules"
                    } else {
                        ""
                    },
                    "",
                    human_bytes(u.total()),
                    human_bytes(u.kernel_bytes),
                    human_bytes(u.disk_bytes),
                    human_bytes(u.initramfs_bytes + u.other_bytes),
                    u.last_used
                        .map_or("never booted".to_string(), |t| format!("last booted {}", store::ago(t))),
                ));
                if k.info.name.starts_with(store::IMPORT_PREFIX) {
                    imports.0 += 1;
                    imports.1 += u.total();
                }
            }
            if !have.is_empty() {
                out.push_str(&format!(
                    "\nreadpath lab remove NAME... removes a kernel and everything kept for it{}\n",
                    if imports.0 > 0 {
                        format!(
                            "; readpath lab remove --imports the {} imported from vm:/path ({})",
                            imports.0,
                            human_bytes(imports.1)
                        )
                    } else {
                        String::new()
                    }
                ));
            }
            out.push_str("\nreadpath lab fetch NAME gets:\n");
            for (name, what) in kernels::FETCHABLE {
                out.push_str(&format!("  {name:<24} {what}\n"));
            }
            print_text(&out)?;
            Ok(())
        }
        LabAction::Remove { names, imports } => remove(data_dir, names, imports),
        LabAction::Run { guest, args } => {
            let mut line = format!(
                "exec /bin/readpath --data-dir={}",
                crate::lab::vm::GUEST_DATA_DIR
            );
            for a in &args {
                line.push(' ');
                line.push_str(&crate::remote::transport::sh_quote(a));
            }
            // The line reaches the guest on the kernel's command line:
            // one that would not fit is refused before anything is read.
            crate::lab::vm::kernel_append(Some(&line))
                .map_err(|e| BadInput(format!("lab run: {e}")))?;
            // The data dir trusted and the kernel found (a `vm:PATH` a
            // bzImage readpath may read) before anything is made.
            let remote = crate::remote::transport::Remote::parse(&guest).map_err(bad_input)?;
            let crate::remote::transport::Remote::Vm(v) = &remote else {
                return Err(BadInput(format!(
                    "lab run {:?}: a lab guest is vm:KERNEL[:...]",
                    crate::sys::printable(&guest, false)
                ))
                .into());
            };
            say(&format!(
                "readpath: lab: booting {} to run readpath {}",
                v.label(),
                args.join(" ")
            ));
            let r = remote.run(&line);
            match r {
                Ok(out) => {
                    print_text(&out)?;
                    Ok(())
                }
                Err(e) => {
                    // No end mark: the line never ran to its end (the
                    // guest did not boot, or its /init was not readpath's).
                    let e = match crate::lab::vm::guest_status(data_dir, &v.kernel) {
                        Some(_) => e.to_string(),
                        None => format!(
                            "{e}\n{}: the guest ended without readpath's summary (no \"readpath-lab: ended (N)\" on its console): the command did not run to its end",
                            v.label()
                        ),
                    };
                    // Only the console log this run made for the guest,
                    // and only its end: none where the guest never
                    // started.
                    let console = crate::lab::vm::console_log(data_dir, &v.kernel);
                    let shown = crate::sys::printable(&console.display().to_string(), false);
                    match crate::lab::vm::console_tail(data_dir, &v.kernel) {
                        Ok(None) => anyhow::bail!("{e}"),
                        Ok(Some(text)) => {
                            let lines: Vec<&str> = text.lines().collect();
                            let tail: Vec<String> = lines[lines.len().saturating_sub(12)..]
                                .iter()
                                .map(|l| crate::sys::printable(l, false))
                                .collect();
                            anyhow::bail!(
                                "{e}\nthe guest's console ({shown}), last lines:\n{}",
                                tail.join("\n")
                            )
                        }
                        Err(c) => anyhow::bail!(
                            "{e}\nthe guest's console ({shown}) was not read: {}",
                            crate::files::plain(&c)
                        ),
                    }
                }
            }
        }
        LabAction::Build {
            revert,
            switches,
            profile,
            source,
            name,
            jobs,
        } => {
            let revert = match revert {
                Some(r) => Some(build::seed(&r).map_err(bad_input)?),
                None => None,
            };
            let req = build::Request {
                source,
                revert,
                switches,
                profile: build::Profile::parse(&profile).map_err(bad_input)?,
                name,
                jobs: jobs.map_or(0, usize::from),
            };
            let mut bar = ProgressLine::new();
            let built = build::build(data_dir, &req, &mut |p| bar.show(&p));
            bar.finish();
            let built = built?;
            let k = &built.kernel;
            print_text(&format!(
                "{}: Linux {} ({}), key {}, {} in {}\nboot it: readpath lab run vm:{} -- kernel check --dir {}\n",
                k.info.name,
                k.info.release,
                k.info.source,
                built.key,
                if built.cached {
                    "from the cache".to_string()
                } else {
                    format!("built in {}", mmss(built.make_time))
                },
                k.dir.display(),
                k.info.name,
                crate::lab::vm::GUEST_KERNEL_DIR,
            ))?;
            Ok(())
        }
        LabAction::Bench {
            guest,
            seconds,
            rounds,
            read,
        } => bench(data_dir, &guest, seconds, rounds, read),
        LabAction::Fetch { name } => {
            if !kernels::FETCHABLE.iter().any(|(n, _)| *n == name) {
                return Err(BadInput(format!(
                    "lab fetch {:?}: allowed {}",
                    crate::sys::printable(&name, false),
                    kernels::FETCHABLE
                        .iter()
                        .map(|(n, _)| *n)
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
                .into());
            }
            let k = kernels::fetch(data_dir, &name, &mut |m| {
                say(&format!("readpath: lab: {m}"))
            })?;
            print_text(&format!(
                "{}: Linux {} ({}) in {}\n",
                k.info.name,
                k.info.release,
                k.info.source,
                k.dir.display()
            ))?;
            Ok(())
        }
    }
}

/// `lab remove`: each kernel named (and with `imports` every `img-*`
/// one) removed with what the lab keeps for it; a name that is not a lab
/// kernel is bad input, checked for all before any is removed.
fn remove(data_dir: &Path, mut names: Vec<String>, imports: bool) -> Result<()> {
    for n in &names {
        kernels::check_name(n).map_err(bad_input)?;
    }
    if imports {
        for k in kernels::list(data_dir)? {
            if k.info.name.starts_with(store::IMPORT_PREFIX) && !names.contains(&k.info.name) {
                names.push(k.info.name);
            }
        }
        if names.is_empty() {
            say("readpath: lab remove --imports: no kernel imported from vm:/path");
            return Ok(());
        }
    }
    let lab = kernels::lab_dir(data_dir).join("kernels");
    if let Some(n) = names.iter().find(|n| !lab.join(n).is_dir()) {
        return Err(BadInput(format!(
            "lab remove {n:?}: no such lab kernel in {} (`readpath lab kernels` lists them)",
            lab.display()
        ))
        .into());
    }
    let mut freed = 0u64;
    for n in &names {
        let b = store::remove(data_dir, n).map_err(|e| anyhow::anyhow!("lab remove {n}: {e}"))?;
        say(&format!("readpath: lab: removed {n} ({})", human_bytes(b)));
        freed += b;
    }
    if names.len() > 1 {
        say(&format!(
            "readpath: lab: {} kernels removed, {} freed",
            names.len(),
            human_bytes(freed)
        ));
    }
    Ok(())
}

fn mmss(d: std::time::Duration) -> String {
    let s = d.as_secs();
    format!("{}m{:02}s", s / 60, s % 60)
}

/// `lab build`'s progress on stderr: a bar on a terminal (make's lines
/// against the last build's count, the time, the latest file), or a line
/// at each tenth elsewhere (a log stays readable).
struct ProgressLine {
    bar: Option<indicatif::ProgressBar>,
    tty: bool,
    last_tenth: u64,
}

impl ProgressLine {
    fn new() -> Self {
        use std::io::IsTerminal;
        Self {
            bar: None,
            tty: std::io::stderr().is_terminal(),
            last_tenth: 0,
        }
    }

    fn show(&mut self, p: &build::Progress) {
        match p {
            build::Progress::Step(s) => {
                self.finish();
                say(&format!("readpath: lab build: {s}"));
            }
            build::Progress::Make {
                done,
                total,
                what,
                elapsed,
            } => {
                if self.tty {
                    let bar = self.bar.get_or_insert_with(|| {
                        let b = indicatif::ProgressBar::new(*total);
                        b.set_style(
                            indicatif::ProgressStyle::with_template(
                                "make [{bar:30}] {percent:>3}% {pos}/{len} lines {elapsed} {wide_msg}",
                            )
                            .expect("static template")
                            .progress_chars("#>."),
                        );
                        b
                    });
                    bar.set_length(*total);
                    bar.set_position(*done);
                    bar.set_message(crate::sys::printable(what, false));
                } else {
                    let pct = (done * 100 / (*total).max(1)).min(100);
                    if pct / 10 > self.last_tenth {
                        self.last_tenth = pct / 10;
                        say(&format!(
                            "readpath: lab build: make {pct}% ({done}/{total} lines, {})",
                            mmss(*elapsed)
                        ));
                    }
                }
            }
        }
    }

    fn finish(&mut self) {
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
    }
}

/// `readpath lab bench GUEST`: each figure measured here, then in the
/// guest by its own readpath (this binary, run as a child, so each side is
/// exactly what `bench crypto` and `run` would print), and the ratios kept
/// in the lab ([`crate::lab::Slowdown`]).
fn bench(
    data_dir: &Path,
    guest: &str,
    seconds: std::time::Duration,
    rounds: u32,
    read: std::time::Duration,
) -> Result<()> {
    let remote = crate::remote::transport::Remote::parse(guest).map_err(bad_input)?;
    let crate::remote::transport::Remote::Vm(v) = &remote else {
        return Err(BadInput(format!(
            "lab bench {:?}: a lab guest is vm:KERNEL[:...]",
            crate::sys::printable(guest, false)
        ))
        .into());
    };
    let exe = std::env::current_exe()?;
    let child = |args: &[String]| -> Result<String> {
        if crate::sys::stop_requested() {
            anyhow::bail!("lab bench stopped");
        }
        let mut cmd = std::process::Command::new(&exe);
        cmd.arg("--data-dir").arg(data_dir).args(args);
        cmd.stderr(std::process::Stdio::inherit());
        crate::sys::die_with_parent(&mut cmd);
        let out = cmd.output()?;
        if !out.status.success() {
            anyhow::bail!("readpath {} failed ({})", args.join(" "), out.status);
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let crypto_args = |remote: Option<&str>| {
        let mut a: Vec<String> = vec![
            "bench".into(),
            "crypto".into(),
            "--seconds".into(),
            format!("{}ms", seconds.as_millis()),
            "--rounds".into(),
            rounds.to_string(),
            "--format".into(),
            "json".into(),
        ];
        if let Some(r) = remote {
            a.extend(["--remote".into(), r.into()]);
        }
        a
    };
    let read_args = |remote: Option<&str>| {
        let mut a: Vec<String> = vec![
            "run".into(),
            "--preset".into(),
            "io_uring-qd1-iowait".into(),
            // O_DIRECT reads miss whatever the size: a small file keeps
            // the lab disk (1 GiB) from filling with datasets.
            "--set".into(),
            "workload.file_size=64M".into(),
            "--duration".into(),
            format!("{}ms", read.as_millis()),
            "--format".into(),
            "json".into(),
        ];
        if let Some(r) = remote {
            a.extend(["--remote".into(), r.into()]);
        }
        a
    };
    let p50 = |json: &str| -> Result<f64> {
        let v: serde_json::Value = serde_json::from_str(json)?;
        v["latency_us"]["p50"]
            .as_f64()
            .ok_or_else(|| anyhow::anyhow!("the run's report has no latency_us.p50"))
    };
    say("readpath: lab bench: here: bench crypto");
    let host: crate::bench::CryptoReport = serde_json::from_str(&child(&crypto_args(None))?)?;
    say("readpath: lab bench: here: a cold 4K O_DIRECT read (io_uring-qd1-iowait)");
    let host_read = p50(&child(&read_args(None))?)?;
    say(&format!("readpath: lab bench: {}: bench crypto", v.label()));
    let vm: crate::bench::CryptoReport = serde_json::from_str(&child(&crypto_args(Some(guest)))?)?;
    say(&format!(
        "readpath: lab bench: {}: a cold 4K O_DIRECT read",
        v.label()
    ));
    let vm_read = p50(&child(&read_args(Some(guest)))?)?;
    let slow = crate::lab::Slowdown::of(v, &host, &vm, host_read, vm_read);
    let kept = slow.save(data_dir);
    let mut out = slow.to_text();
    match kept {
        Ok(p) => out.push_str(&format!(
            "kept in {} (shown beside the guest's times)\n",
            p.display()
        )),
        Err(e) => out.push_str(&format!("not kept: {e}\n")),
    }
    print_text(&out)?;
    Ok(())
}
