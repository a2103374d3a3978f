//! The seeds as switches in a running kernel: what readpath's lab patch
//! (`assets/lab/readpath-switches.patch`, built by `lab build --switches`)
//! puts in a kernel, and how readpath's settings map onto it.
//!
//! A workqueue's flags are fixed when the kernel allocates it, so on a
//! stock kernel the explorer's `w`, `W`, `h` and `i` can move only the
//! model. The lab patch allocates every variant of fscrypt's and fs-verity's
//! read queues at init (bound or unbound, WQ_HIGHPRI or not, all under the
//! queue's own name) and picks one at each queueing by a switch the kernel
//! reads with `READ_ONCE`; io_uring's CQ wait reads one for iowait. The
//! switches are built-in module parameters under [`DIR`]
//! (`/sys/module/readpath/parameters/`), default to what 6.1 does, and can be
//! set on the kernel command line too (`readpath.fsverity_unbound=1`). An
//! item already queued finishes where it was queued.
//!
//! This module knows the switches (names, defaults, values), finds whether
//! the running kernel has them ([`probe`]), and works out the values a
//! run's settings ask for ([`wanted`]); the writes go through the knob
//! journal (`kernel::knobs`), so each is put back on exit, on a signal and
//! after a crash (`readpath kernel restore`).

use std::path::{Path, PathBuf};

use crate::settings::{Settings, SleepMode, VerifyMode, WorkerMode};

/// Where the lab kernel exposes its switches.
pub const DIR: &str = crate::sys::LAB_SWITCHES_DIR;

/// The values a switch takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Values {
    /// A bool parameter: `Y` or `N` (the kernel reads back what it
    /// parsed as `Y`/`N`; readpath writes those).
    Bool,
    /// A count, `0..=hi`.
    Count {
        /// The largest value.
        hi: u32,
    },
}

/// One switch of the lab patch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Switch {
    /// Its file name under [`DIR`].
    pub name: &'static str,
    /// Its name as a kernel parameter (`readpath.fsverity_unbound`): the
    /// knob journal's key for it.
    pub key: &'static str,
    /// Its value in 6.1 (what the kernel boots with).
    pub default: &'static str,
    /// What it takes.
    pub values: Values,
    /// The seed it stands for.
    pub seed: &'static str,
    /// What it does, in words.
    pub what: &'static str,
}

impl Switch {
    /// Its file under `root` (`/` on the machine itself).
    pub fn path_under(&self, root: &Path) -> PathBuf {
        root.join(DIR.trim_start_matches('/')).join(self.name)
    }

    /// Its file on this machine.
    pub fn path(&self) -> PathBuf {
        Path::new(DIR).join(self.name)
    }

    /// Whether it takes `value` (as written or read back).
    pub fn takes(&self, value: &str) -> bool {
        match self.values {
            Values::Bool => matches!(value, "Y" | "N"),
            Values::Count { hi } => {
                (1..=4).contains(&value.len())
                    && value.bytes().all(|b| b.is_ascii_digit())
                    && value.parse::<u32>().is_ok_and(|n| n <= hi)
            }
        }
    }
}

/// fscrypt's read queue is WQ_UNBOUND (6.1: yes; before 2018: no).
pub const FSCRYPT_UNBOUND: &str = "fscrypt_unbound";
/// fscrypt's read queue is WQ_HIGHPRI (6.1: yes).
pub const FSCRYPT_HIGHPRI: &str = "fscrypt_highpri";
/// fscrypt's unbound read queue's max_active (0: num_online_cpus()).
pub const FSCRYPT_MAX_ACTIVE: &str = "fscrypt_max_active";
/// fs-verity's read queue is WQ_UNBOUND (6.1: no, since the 2023 seed).
pub const FSVERITY_UNBOUND: &str = "fsverity_unbound";
/// fs-verity's read queue is WQ_HIGHPRI (6.1: yes).
pub const FSVERITY_HIGHPRI: &str = "fsverity_highpri";
/// io_uring's CQ wait marks the task in iowait while requests are pending
/// (6.1: yes, since the 2023 seed).
pub const IO_URING_IOWAIT: &str = "io_uring_iowait";

/// Every switch of the lab patch, in the order `kernel.toml` lists them.
pub const SWITCHES: &[Switch] = &[
    Switch {
        name: FSVERITY_UNBOUND,
        key: concat!("readpath.", "fsverity_unbound"),
        default: "N",
        values: Values::Bool,
        seed: "fsverity-2023",
        what: "fsverity_read_queue: N per-CPU (6.1, the 2023 seed), Y WQ_UNBOUND (before it)",
    },
    Switch {
        name: FSVERITY_HIGHPRI,
        key: concat!("readpath.", "fsverity_highpri"),
        default: "Y",
        values: Values::Bool,
        seed: "fsverity-2023",
        what: "fsverity_read_queue: Y WQ_HIGHPRI (nice -20 workers), N normal priority",
    },
    Switch {
        name: FSCRYPT_UNBOUND,
        key: concat!("readpath.", "fscrypt_unbound"),
        default: "Y",
        values: Values::Bool,
        seed: "fscrypt-2018",
        what: "fscrypt_read_queue: Y WQ_UNBOUND (6.1, the 2018 seed), N per-CPU (before it)",
    },
    Switch {
        name: FSCRYPT_HIGHPRI,
        key: concat!("readpath.", "fscrypt_highpri"),
        default: "Y",
        values: Values::Bool,
        seed: "fscrypt-2018",
        what: "fscrypt_read_queue: Y WQ_HIGHPRI (nice -20 workers), N normal priority",
    },
    Switch {
        name: FSCRYPT_MAX_ACTIVE,
        key: concat!("readpath.", "fscrypt_max_active"),
        default: "0",
        values: Values::Count { hi: 512 },
        seed: "fscrypt-2018",
        what: "fscrypt_read_queue (unbound): items run at once, 0 = num_online_cpus() (6.1); the per-CPU variant keeps the default 256, as before 2018",
    },
    Switch {
        name: IO_URING_IOWAIT,
        key: concat!("readpath.", "io_uring_iowait"),
        default: "Y",
        values: Values::Bool,
        seed: "io_uring-2023",
        what: "io_uring CQ wait: Y iowait while requests are pending (6.1, the 2023 seed), N a plain sleep (before it)",
    },
];

/// The switch whose file is `path` (absolute, under [`DIR`]), if any.
pub fn at(path: &Path) -> Option<&'static Switch> {
    let name = path.strip_prefix(DIR).ok()?.to_str()?;
    switch(name)
}

/// Switch `name`, if the lab patch has one by that name.
pub fn switch(name: &str) -> Option<&'static Switch> {
    SWITCHES.iter().find(|s| s.name == name)
}

/// Whether the kernel whose sysfs is under `root` has every switch (a
/// kernel built with the lab patch, running now).
pub fn present_under(root: &Path) -> bool {
    SWITCHES.iter().all(|s| s.path_under(root).is_file())
}

/// Whether the running kernel has the lab's switches.
pub fn probe() -> bool {
    present_under(Path::new("/"))
}

fn yn(b: bool) -> &'static str {
    if b { "Y" } else { "N" }
}

/// A queue setting of `inline` (`workers.mode`, `workers.verify_mode`),
/// which the kernel's post-read path does not have.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key} = \"inline\": the kernel always queues its post-read work (use bound or unbound)")]
pub struct InlineQueue {
    /// The key set to `inline`.
    pub key: &'static str,
}

/// The switch values `s` asks for on a kernel that has them, as
/// `(switch, value)` in [`SWITCHES`] order, or the setting the kernel
/// cannot run and why. The kernel's queues follow the model's: the decrypt
/// stage is fscrypt's queue (`workers.mode`), the verify stage fs-verity's
/// (`workers.verify_mode` when decryption is on, `same` meaning decrypt's;
/// `workers.mode` when verity is the only stage, as in the model); a queue
/// of a stage that is off keeps 6.1's placement (its switch is not moved);
/// `workers.highpri` is both queues' WQ_HIGHPRI, `workers.max_active`
/// fscrypt's unbound max_active; `workload.sleep = plain` turns io_uring's
/// iowait off (iowait and poll leave it as 6.1 has it).
pub fn wanted(s: &Settings) -> Result<Vec<(&'static str, String)>, InlineQueue> {
    let inline = |key: &'static str| InlineQueue { key };
    let decrypt_unbound = match s.workers.mode {
        WorkerMode::Bound => false,
        WorkerMode::Unbound => true,
        WorkerMode::Inline => return Err(inline(crate::key!(workers.mode).name())),
    };
    let verify_unbound = if s.pipeline.decrypt {
        match s.workers.verify_mode {
            VerifyMode::Same => decrypt_unbound,
            VerifyMode::Bound => false,
            VerifyMode::Unbound => true,
            VerifyMode::Inline => return Err(inline(crate::key!(workers.verify_mode).name())),
        }
    } else {
        decrypt_unbound
    };
    let hi = yn(s.workers.highpri);
    let default = |name: &str| switch(name).map_or("", |s| s.default);
    let verify = if s.pipeline.verity {
        yn(verify_unbound)
    } else {
        default(FSVERITY_UNBOUND)
    };
    let decrypt = if s.pipeline.decrypt {
        yn(decrypt_unbound)
    } else {
        default(FSCRYPT_UNBOUND)
    };
    Ok(vec![
        (FSVERITY_UNBOUND, verify.to_string()),
        (FSVERITY_HIGHPRI, hi.to_string()),
        (FSCRYPT_UNBOUND, decrypt.to_string()),
        (FSCRYPT_HIGHPRI, hi.to_string()),
        (FSCRYPT_MAX_ACTIVE, s.workers.max_active.to_string()),
        (
            IO_URING_IOWAIT,
            yn(s.workload.sleep != SleepMode::Plain).to_string(),
        ),
    ])
}

/// The switches' values now on the kernel under `root`, by name (a switch
/// that cannot be read, or reads as a value it does not take, is left
/// out).
pub fn read_under(root: &Path) -> Vec<(&'static str, String)> {
    SWITCHES
        .iter()
        .filter_map(|s| {
            let v = read_value(&s.path_under(root))?;
            s.takes(&v).then_some((s.name, v))
        })
        .collect()
}

/// The value in switch file `path` (trimmed), if it reads: read as the
/// knob journal reads every knob (a bounded read of a file under `/sys`).
pub fn read_value(path: &Path) -> Option<String> {
    super::journal::read_sysfs(path).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get<'a>(w: &'a [(&str, String)], name: &str) -> &'a str {
        &w.iter().find(|(n, _)| *n == name).unwrap().1
    }

    #[test]
    fn the_defaults_are_what_6_1_runs_and_the_settings_defaults_ask_for_them() {
        let w = wanted(&Settings::default()).unwrap();
        assert_eq!(w.len(), SWITCHES.len());
        for s in SWITCHES {
            assert_eq!(get(&w, s.name), s.default, "{}", s.name);
            assert!(s.takes(s.default), "{}", s.name);
        }
    }

    #[test]
    fn each_setting_moves_its_switch() {
        let mut s = Settings::default();
        s.pipeline.decrypt = true;
        s.workers.verify_mode = VerifyMode::Unbound;
        assert_eq!(get(&wanted(&s).unwrap(), FSVERITY_UNBOUND), "Y");
        s.workers.verify_mode = VerifyMode::Same;
        s.workers.mode = WorkerMode::Bound;
        let w = wanted(&s).unwrap();
        assert_eq!(
            (get(&w, FSCRYPT_UNBOUND), get(&w, FSVERITY_UNBOUND)),
            ("N", "N")
        );
        // Verity alone: workers.mode places it, as in the model, and
        // fscrypt's queue (no work) keeps 6.1's placement.
        s.pipeline.decrypt = false;
        s.workers.mode = WorkerMode::Bound;
        assert_eq!(get(&wanted(&s).unwrap(), FSCRYPT_UNBOUND), "Y");
        s.workers.mode = WorkerMode::Unbound;
        s.workers.verify_mode = VerifyMode::Bound;
        assert_eq!(get(&wanted(&s).unwrap(), FSVERITY_UNBOUND), "Y");
        s.workers.highpri = false;
        s.workers.max_active = 3;
        s.workload.sleep = SleepMode::Plain;
        let w = wanted(&s).unwrap();
        assert_eq!(get(&w, FSVERITY_HIGHPRI), "N");
        assert_eq!(get(&w, FSCRYPT_HIGHPRI), "N");
        assert_eq!(get(&w, FSCRYPT_MAX_ACTIVE), "3");
        assert_eq!(get(&w, IO_URING_IOWAIT), "N");
        s.workers.mode = WorkerMode::Inline;
        let e = wanted(&s).unwrap_err();
        assert_eq!(e.key, "workers.mode");
        assert!(e.to_string().contains("always queues"), "{e}");
    }

    #[test]
    fn values_are_checked() {
        let b = switch(FSVERITY_UNBOUND).unwrap();
        assert!(b.takes("Y") && b.takes("N"));
        for v in ["1", "y", "", "YY", "N\n"] {
            assert!(!b.takes(v), "{v:?}");
        }
        let c = switch(FSCRYPT_MAX_ACTIVE).unwrap();
        assert!(c.takes("0") && c.takes("512"));
        for v in ["513", "-1", "+1", "", "99999", "1 "] {
            assert!(!c.takes(v), "{v:?}");
        }
        assert!(switch("nope").is_none());
        for s in SWITCHES {
            assert_eq!(s.key, format!("readpath.{}", s.name));
            assert_eq!(at(&s.path()), Some(s));
        }
        assert!(at(Path::new("/sys/module/readpath/parameters/../x")).is_none());
        assert!(
            at(Path::new(
                "/sys/module/workqueue/parameters/fsverity_unbound"
            ))
            .is_none()
        );
    }

    #[test]
    fn a_kernel_has_them_only_with_every_file() {
        let root = tempfile::tempdir().unwrap();
        assert!(!present_under(root.path()));
        for s in SWITCHES {
            let p = s.path_under(root.path());
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, format!("{}\n", s.default)).unwrap();
        }
        assert!(present_under(root.path()));
        assert_eq!(read_under(root.path()).len(), SWITCHES.len());
        std::fs::write(
            switch(IO_URING_IOWAIT).unwrap().path_under(root.path()),
            "x",
        )
        .unwrap();
        assert_eq!(read_under(root.path()).len(), SWITCHES.len() - 1);
    }

    #[test]
    fn the_lab_patch_defines_every_switch_with_its_default() {
        let patch = include_str!("../../assets/lab/readpath-switches.patch");
        for s in SWITCHES {
            assert!(
                patch.contains(&format!("module_param_named({}, ", s.name))
                    || patch.contains(&format!("module_param_cb({}, ", s.name)),
                "{}",
                s.name
            );
        }
        assert!(patch.contains("static bool readpath_fsverity_unbound;\n"));
        assert!(patch.contains("static bool readpath_fscrypt_unbound = true;\n"));
        assert!(patch.contains("static bool readpath_io_uring_iowait = true;\n"));
        assert!(patch.contains("#define MODULE_PARAM_PREFIX \"readpath.\""));
    }
}
