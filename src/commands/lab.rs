//! `readpath lab`: the kernel lab's kernels listed, and one fetched (see
//! [`crate::lab`]).

use std::path::Path;

use anyhow::Result;

use crate::cli::LabAction;
use crate::invocation::{BadInput, say};
use crate::lab::kernels;

use super::outputs::print_text;

/// `readpath lab ...`.
pub(super) fn lab(data_dir: &Path, action: LabAction) -> Result<()> {
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
            for k in &have {
                out.push_str(&format!(
                    "  {:<24} Linux {} ({}){}\n",
                    k.info.name,
                    k.info.release,
                    k.info.source,
                    if k.modules().is_some() {
                        ", with modules"
                    } else {
                        ""
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
        LabAction::Run { guest, args } => {
            let remote = crate::remote::transport::Remote::parse(&guest).map_err(BadInput)?;
            let crate::remote::transport::Remote::Vm(v) = &remote else {
                return Err(BadInput(format!(
                    "lab run {:?}: a lab guest is vm:KERNEL[:...]",
                    crate::sys::printable(&guest, false)
                ))
                .into());
            };
            let mut line = format!(
                "exec /bin/readpath --data-dir={}",
                crate::lab::vm::GUEST_DATA_DIR
            );
            for a in &args {
                line.push(' ');
                line.push_str(&crate::remote::transport::sh_quote(a));
            }
            say(&format!(
                "readpath: lab: booting {} to run readpath {}",
                v.label(),
                args.join(" ")
            ));
            let r = remote.run(&line);
            let console = crate::lab::vm::console_log(data_dir, &v.kernel);
            match r {
                Ok(out) => {
                    print_text(&out)?;
                    Ok(())
                }
                Err(e) => {
                    let tail: Vec<String> = std::fs::read_to_string(&console)
                        .unwrap_or_default()
                        .lines()
                        .rev()
                        .take(12)
                        .map(|l| crate::sys::printable(l, false))
                        .collect::<Vec<_>>()
                        .into_iter()
                        .rev()
                        .collect();
                    anyhow::bail!(
                        "{e}\nthe guest's console ({}), last lines:\n{}",
                        console.display(),
                        tail.join("\n")
                    )
                }
            }
        }
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
