//! `readpath lab build`: a lab kernel built from source, with a seed patch
//! reverted where asked, so the kernel before a seed and the kernel after
//! it can be booted side by side, or with readpath's lab patch
//! (`--switches`), so one kernel runs both sides of every seed, switched at
//! run time (`kernel::switches`).
//!
//! The source is Debian's `linux-source-6.1` (downloaded with the
//! system's package tool and unpacked into the data dir, not installed) or
//! a clean tree the user names. The configuration is `make tinyconfig`
//! plus the lab's fragment (`assets/lab/lab.config`: virtio, ext4 with
//! fscrypt and fs-verity, io_uring, tracing, schedstats, delay accounting,
//! cgroups, AF_ALG; everything built in, so the guest needs no modules),
//! checked option by option after `make olddefconfig`, and a profile's
//! (`--profile desktop|phone`: the preemption model of Debian's or Android's
//! kernels). A seed is reverted by replacing its text in a copy of the tree
//! made of hard links, the changed file written anew; the lab patch is
//! applied with `patch` to fresh copies of the files it changes in such a
//! tree (the source itself is never written). The build runs out of tree
//! (`make O=`) in a directory of its own; only the image and its
//! configuration are kept, under a key made of the source's identity, the
//! revert or patch, the fragments and the compiler, so a second build of
//! the same kernel is instant.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use super::kernels::{self, Kernel, KernelInfo};
use super::process;
use crate::sys::trust;

/// The lab's kernel configuration fragment, merged over `tinyconfig`.
pub const FRAGMENT: &str = include_str!("../../assets/lab/lab.config");

/// readpath's lab patch: every seed a switch the kernel reads at each
/// queueing (`kernel::switches` knows them).
pub const SWITCHES_PATCH: &str = include_str!("../../assets/lab/readpath-switches.patch");

/// The choices that decide where work runs (`--profile`): kept with the
/// lab's kernels, which name theirs.
pub use super::kernels::Profile;

/// The files [`SWITCHES_PATCH`] changes, relative to the tree (its `+++ b/`
/// lines).
pub fn patched_files(patch: &str) -> Vec<&str> {
    patch
        .lines()
        .filter_map(|l| l.strip_prefix("+++ b/"))
        .map(|f| f.split('\t').next().unwrap_or(f).trim())
        .collect()
}

/// Bumped when the recipe changes in a way the key's other parts do not
/// show (the steps, not the inputs).
const RECIPE: u32 = 1;

/// A seed patch readpath can revert in a 6.1 source tree: the text the
/// tree has (the seed applied) and the text it had before the seed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seed {
    /// Its name on the command line (`fsverity-2023`).
    pub name: &'static str,
    /// The patch in `../shared/seeds/` (and the README's seed table).
    pub patch: &'static str,
    /// The file it changes, relative to the tree.
    pub file: &'static str,
    /// The text the tree holds with the seed applied (found exactly once).
    pub after: &'static str,
    /// The text put in its place: the kernel before the seed.
    pub before: &'static str,
    /// What reverting it changes, in words.
    pub what: &'static str,
    /// The preset that reproduces it.
    pub preset: &'static str,
    /// The model's setting that stands for it, and its value before and
    /// after the seed (the model beside each kernel runs the value that
    /// kernel has).
    pub setting: (crate::settings::Key, &'static str, &'static str),
}

/// The three seeds, as reverts of Debian's 6.1 source (which carries all
/// three: the fs-verity change was backported to 6.1 stable, and the
/// io_uring change is there in its later form, gated on pending I/O).
pub const SEEDS: &[Seed] = &[
    Seed {
        name: "fsverity-2023",
        patch: "2023-fsverity-remove-wq-unbound.txt",
        file: "fs/verity/verify.c",
        after: "alloc_workqueue(\"fsverity_read_queue\",\n\t\t\t\t\t\t  WQ_HIGHPRI,\n",
        before: "alloc_workqueue(\"fsverity_read_queue\",\n\t\t\t\t\t\t  WQ_UNBOUND | WQ_HIGHPRI, /* readpath lab: seed fsverity-2023 reverted */\n",
        what: "fsverity_read_queue unbound again (WQ_UNBOUND | WQ_HIGHPRI), as before 2023",
        preset: "fsverity-bound-vs-unbound",
        setting: (crate::key!(workers.mode), "unbound", "bound"),
    },
    Seed {
        name: "fscrypt-2018",
        patch: "2018-fscrypt-unbound-decryption-wq.txt",
        file: "fs/crypto/crypto.c",
        after: "alloc_workqueue(\"fscrypt_read_queue\",\n\t\t\t\t\t\t WQ_UNBOUND | WQ_HIGHPRI,\n\t\t\t\t\t\t num_online_cpus());\n",
        before: "alloc_workqueue(\"fscrypt_read_queue\",\n\t\t\t\t\t\t WQ_HIGHPRI, 0); /* readpath lab: seed fscrypt-2018 reverted */\n",
        what: "fscrypt_read_queue bound again (WQ_HIGHPRI, max_active 0), as before 2018",
        preset: "fscrypt-slow-cipher",
        setting: (crate::key!(workers.mode), "bound", "unbound"),
    },
    Seed {
        name: "io_uring-2023",
        patch: "2023-io_uring-io_schedule-in-cqring-wait.txt",
        file: "io_uring/io_uring.c",
        after: "\tif (current_pending_io())\n\t\tcurrent->in_iowait = 1;\n",
        before: "\tif (0 && current_pending_io()) /* readpath lab: seed io_uring-2023 reverted */\n\t\tcurrent->in_iowait = 1;\n",
        what: "io_uring's CQ wait no longer marks the task in iowait, as before 2023",
        preset: "io_uring-qd1-iowait",
        setting: (crate::key!(workload.sleep), "plain", "iowait"),
    },
];

impl Seed {
    /// The published result, from the seed's shipped preset, oriented
    /// before (the seed reverted) -> after: the preset's `[compare]` runs
    /// its first value, then its second.
    pub fn published(&self) -> crate::scenario::preset::Published {
        let p = crate::scenario::preset::shipped(self.preset)
            .expect("every seed names a shipped preset (tested)");
        let published = p
            .published
            .expect("every seed's preset states its published result (tested)");
        let compare = p.compare.expect("a preset with [published] has [compare]");
        if compare.values.first().map(String::as_str) == Some(self.setting.1) {
            published
        } else {
            published.inverted()
        }
    }

    /// What the seed's verdict is judged by.
    pub fn facts(&self) -> crate::output::experiment::SeedFacts<'static> {
        crate::output::experiment::SeedFacts {
            name: self.name,
            published: self.published(),
            setting: self.setting.0.name(),
        }
    }
}

/// Seed `name`, or an error naming those allowed.
pub fn seed(name: &str) -> Result<&'static Seed, UnknownSeed> {
    SEEDS
        .iter()
        .find(|s| s.name == name)
        .ok_or_else(|| UnknownSeed {
            name: name.to_string(),
        })
}

/// A `lab build --revert` that names no seed: the name and those allowed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "lab build --revert {:?}: allowed {}",
    crate::sys::printable(name, false),
    SEEDS.iter().map(|s| s.name).collect::<Vec<_>>().join(", ")
)]
pub struct UnknownSeed {
    /// The name as given.
    pub name: String,
}

/// Why a seed cannot be reverted in a tree's file ([`revert`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RevertError {
    /// The file has the seed's old text already.
    #[error("{file}: seed {seed} is already reverted in this tree")]
    AlreadyReverted {
        /// The file, in the tree.
        file: &'static str,
        /// The seed.
        seed: &'static str,
    },
    /// The seed's text is not there exactly once.
    #[error(
        "{file}: seed {seed}'s text found {count} times, not once: this tree is not the 6.1 source readpath knows how to revert it in (revert it by hand and build with --source)"
    )]
    NotOnce {
        /// The file, in the tree.
        file: &'static str,
        /// The seed.
        seed: &'static str,
        /// How many times its text is there.
        count: usize,
    },
}

/// `text` (file `seed.file` of a tree) with `seed` reverted: its text
/// must be there exactly once, or the tree is not one readpath knows how
/// to revert it in.
pub fn revert(text: &str, seed: &Seed) -> Result<String, RevertError> {
    match text.matches(seed.after).count() {
        1 => Ok(text.replacen(seed.after, seed.before, 1)),
        0 if text.contains(seed.before) => Err(RevertError::AlreadyReverted {
            file: seed.file,
            seed: seed.name,
        }),
        count => Err(RevertError::NotOnce {
            file: seed.file,
            seed: seed.name,
            count,
        }),
    }
}

/// What `lab build` is asked to do.
#[derive(Debug, Clone, Default)]
pub struct Request {
    /// A kernel tree; `None`: Debian's `linux-source-6.1`.
    pub source: Option<PathBuf>,
    /// The seed to revert, if any.
    pub revert: Option<&'static Seed>,
    /// Apply the lab patch ([`SWITCHES_PATCH`]); not with `revert`.
    pub switches: bool,
    /// The profile.
    pub profile: Profile,
    /// The kernel's name in the lab; `None`: `6.1` (or the tree's
    /// `VERSION.PATCHLEVEL`), plus `-revert-SEED` or `-switches`, plus
    /// `-PROFILE` for a profile other than desktop.
    pub name: Option<String>,
    /// `make -j`; 0: one per online CPU.
    pub jobs: usize,
}

/// How far a build is.
#[derive(Debug, Clone, PartialEq)]
pub enum Progress {
    /// A step, in words.
    Step(String),
    /// `make` wrote line `done` of about `total` (from the last build of
    /// the same configuration, or an estimate); `what` is the line.
    Make {
        /// Lines so far.
        done: u64,
        /// Lines expected.
        total: u64,
        /// The latest line (`CC fs/verity/verify.o`).
        what: String,
        /// Since make started.
        elapsed: Duration,
    },
}

/// What a build gave.
#[derive(Debug, Clone)]
pub struct Built {
    /// The kernel, installed in the lab.
    pub kernel: Kernel,
    /// True when the image came from the cache.
    pub cached: bool,
    /// The build's key.
    pub key: String,
    /// How long make took (zero when cached).
    pub make_time: Duration,
}

/// The lines `make bzImage` writes for the lab configuration of 6.1, as
/// measured here (the first build's progress estimate; later builds use
/// the count the last one recorded).
const MAKE_LINES_ESTIMATE: u64 = 1845;

fn sources_dir(data: &Path) -> PathBuf {
    kernels::lab_dir(data).join("sources")
}

fn builds_dir(data: &Path) -> PathBuf {
    kernels::lab_dir(data).join("builds")
}

/// The programs a build needs, with the Debian packages that give them:
/// an error listing every one missing.
pub fn check_tools() -> io::Result<()> {
    let mut missing = Vec::new();
    for (prog, pkg) in [
        ("make", "make"),
        ("gcc", "gcc"),
        ("flex", "flex"),
        ("bison", "bison"),
        ("bc", "bc"),
        ("perl", "perl"),
        ("tar", "tar"),
        ("patch", "patch"),
        ("xz", "xz-utils"),
    ] {
        if find_program(prog).is_none() {
            missing.push(pkg);
        }
    }
    if !Path::new("/usr/include/libelf.h").exists() && !Path::new("/usr/include/gelf.h").exists() {
        missing.push("libelf-dev");
    }
    if missing.is_empty() {
        Ok(())
    } else {
        Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!(
                "lab build needs {} (apt-get install {})",
                missing.join(", "),
                missing.join(" ")
            ),
        ))
    }
}

fn find_program(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file())
}

use kernels::run;

/// Debian's `linux-source-6.1`, unpacked in the data dir (once per
/// package version): (its tree, what it is).
fn debian_source(data: &Path, say: &mut dyn FnMut(Progress)) -> io::Result<(PathBuf, String)> {
    let package = "linux-source-6.1";
    let policy = run(
        Command::new("apt-cache").args(["policy", package]),
        "apt-cache policy",
    )
    .map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("{e} (Debian's apt is needed for the default source; or pass --source DIR)"),
        )
    })?;
    let version = policy
        .lines()
        .find_map(|l| l.trim().strip_prefix("Candidate:"))
        .map(str::trim)
        .filter(|v| !v.is_empty() && *v != "(none)")
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("apt knows no {package} (run `apt-get update`, or add Debian 12's main component; or pass --source DIR)"),
            )
        })?
        .to_string();
    if !version
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '+' | '~'))
    {
        return Err(io::Error::other(format!(
            "apt-cache policy {package}: unexpected version {:?}",
            crate::sys::printable(&version, false)
        )));
    }
    let what = format!("Debian {package} {version}");
    let sources = sources_dir(data);
    trust::ensure_dir(&sources)?;
    let tree = sources.join(format!("{package}_{version}"));
    if tree.join(".readpath-complete").is_file() {
        trust::check_dir(&tree)?;
        return Ok((tree, what));
    }
    let work = sources.join(format!(".fetch-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    trust::ensure_dir(&work)?;
    let result = (|| -> io::Result<()> {
        say(Progress::Step(format!(
            "downloading {package} {version} (apt-get download, about 140 MB)"
        )));
        let deb = kernels::apt_download(&work, &format!("{package}={version}"))?;
        let root = work.join("root");
        process::polled(
            Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&root),
            "dpkg-deb -x",
            &mut |_| {},
        )?;
        let _ = std::fs::remove_file(&deb);
        let tarball = root.join(format!("usr/src/{package}.tar.xz"));
        say(Progress::Step(format!(
            "unpacking {} (about 1.5 GB)",
            tarball.display()
        )));
        process::polled(
            Command::new("tar")
                .arg("-xJf")
                .arg(&tarball)
                .arg("--no-same-owner")
                .arg("-C")
                .arg(&work),
            "tar -xJf",
            &mut |_| {},
        )?;
        let unpacked = work.join(package);
        trust::write_state(&unpacked.join(".readpath-complete"), what.as_bytes())?;
        std::fs::rename(&unpacked, &tree)
    })();
    let _ = std::fs::remove_dir_all(&work);
    result?;
    Ok((tree, what))
}

/// A tree the user named: checked (a kernel tree, clean for an out-of-tree
/// build), and identified by its path, its version and its newest file's
/// time (a changed file changes the key).
fn user_source(dir: &Path) -> io::Result<(PathBuf, String)> {
    let dir = dir.canonicalize().map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("lab build --source {}: {e}", dir.display()),
        )
    })?;
    let makefile = read_source(&dir.join("Makefile")).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!(
                "lab build --source {}: no kernel Makefile ({e})",
                dir.display()
            ),
        )
    })?;
    let version = makefile_version(&makefile).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "lab build --source {}: its Makefile names no VERSION/PATCHLEVEL/SUBLEVEL: not a kernel tree",
                dir.display()
            ),
        )
    })?;
    if dir.join(".config").exists() || dir.join("include/config").exists() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "lab build --source {}: the tree has been configured or built in place (.config); readpath builds out of tree and needs it clean (`make mrproper` there)",
                dir.display()
            ),
        ));
    }
    let newest = newest_mtime(&dir)?;
    Ok((
        dir.clone(),
        format!("{} (Linux {version}, newest file {newest})", dir.display()),
    ))
}

/// `VERSION.PATCHLEVEL.SUBLEVEL` from a kernel Makefile.
pub fn makefile_version(makefile: &str) -> Option<String> {
    let get = |key: &str| {
        makefile.lines().take(20).find_map(|l| {
            let (k, v) = l.split_once('=')?;
            (k.trim() == key).then(|| v.trim().to_string())
        })
    };
    let (v, p, s) = (get("VERSION")?, get("PATCHLEVEL")?, get("SUBLEVEL")?);
    [&v, &p, &s]
        .iter()
        .all(|x| !x.is_empty() && x.chars().all(|c| c.is_ascii_digit()))
        .then(|| format!("{v}.{p}.{s}"))
}

fn newest_mtime(dir: &Path) -> io::Result<u64> {
    let mut newest = 0u64;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d)? {
            let e = e?;
            let t = e.file_type()?;
            if t.is_dir() {
                if e.file_name() != ".git" {
                    stack.push(e.path());
                }
            } else if t.is_file() {
                use std::os::unix::fs::MetadataExt;
                newest = newest.max(e.metadata()?.mtime().max(0) as u64);
            }
        }
    }
    Ok(newest)
}

/// The build's key: the source's identity, the revert or the lab patch,
/// the fragments, the compiler and the recipe.
pub fn key(
    identity: &str,
    revert: Option<&Seed>,
    switches: bool,
    profile: Profile,
    compiler: &str,
) -> String {
    let mut h = Sha256::new();
    for part in [
        identity,
        revert.map_or("", |s| s.name),
        revert.map_or("", |s| s.after),
        revert.map_or("", |s| s.before),
        if switches { SWITCHES_PATCH } else { "" },
        FRAGMENT,
        profile.fragment(),
        compiler,
        &RECIPE.to_string(),
    ] {
        h.update(part.as_bytes());
        h.update([0]);
    }
    h.finalize()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The `CONFIG_X=y` lines of the fragment and `profile`'s that `config` (a
/// final `.config`) lacks: each names an option the tree does not have or
/// that another choice overrode.
pub fn missing_options(config: &str, profile: Profile) -> Vec<String> {
    FRAGMENT
        .lines()
        .chain(profile.fragment().lines())
        .map(str::trim)
        .filter(|l| l.starts_with("CONFIG_"))
        .filter(|want| !config.lines().any(|l| l.trim() == *want))
        .map(str::to_string)
        .collect()
}

/// A copy of `source` made of hard links (a plain copy where links
/// cannot be made), with `seed`'s file written anew, reverted.
fn reverted_tree(source: &Path, seed: &Seed, into: &Path) -> io::Result<()> {
    let text = read_source(&source.join(seed.file))?;
    let new = revert(&text, seed).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    linked_tree(source, into)?;
    let file = into.join(seed.file);
    // A new file, not a write through the link into the source.
    std::fs::remove_file(&file)?;
    trust::create_new(&file, 0o644)?.write_all(new.as_bytes())?;
    Ok(())
}

/// A copy of `source` made of hard links with the lab patch applied: each
/// file it changes first replaced by a copy of its own (so `patch` never
/// writes through a link into the source), then `patch -p1` run with the
/// patch from `work` (refused whole if any hunk does not apply).
fn patched_tree(source: &Path, into: &Path, work: &Path) -> io::Result<()> {
    linked_tree(source, into)?;
    for f in patched_files(SWITCHES_PATCH) {
        let text = read_source(&source.join(f))?;
        let file = into.join(f);
        std::fs::remove_file(&file)?;
        trust::create_new(&file, 0o644)?.write_all(text.as_bytes())?;
    }
    let patch = work.join("readpath-switches.patch");
    trust::create_new(&patch, 0o644)?.write_all(SWITCHES_PATCH.as_bytes())?;
    process::polled(
        Command::new("patch")
            .args([
                "-p1",
                "--forward",
                "--batch",
                "--no-backup-if-mismatch",
                "-i",
            ])
            .arg(&patch)
            .current_dir(into),
        "patch -p1 (assets/lab/readpath-switches.patch: a tree other than the 6.1 source it was made for? build one by hand and use --source)",
        &mut |_| {},
    )?;
    Ok(())
}

/// A copy of `source` made of hard links (a plain copy where links cannot
/// be made).
fn linked_tree(source: &Path, into: &Path) -> io::Result<()> {
    let linked = process::polled(
        Command::new("cp").arg("-al").arg(source).arg(into),
        "cp -al",
        &mut |_| {},
    );
    if let Err(e) = linked {
        if e.kind() == io::ErrorKind::Interrupted {
            return Err(e);
        }
        let _ = std::fs::remove_dir_all(into);
        process::polled(
            Command::new("cp").arg("-a").arg(source).arg(into),
            "cp -a",
            &mut |_| {},
        )?;
    }
    Ok(())
}

/// A text file of the kernel source tree (its `Makefile`, a seed's file),
/// read as every input is ([`crate::files::read_capped`]): at most 1 MiB
/// of UTF-8, a FIFO or a device never read forever, a stop signal ending
/// the read.
fn read_source(path: &Path) -> io::Result<String> {
    crate::files::read_capped(path, crate::files::MAX_TEXT_INPUT)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))
}

/// Builds (or takes from the cache) the kernel `req` asks for and
/// installs it in the lab. `say` hears each step and make's progress.
pub fn build(data: &Path, req: &Request, say: &mut dyn FnMut(Progress)) -> io::Result<Built> {
    let (source, identity) = match &req.source {
        Some(dir) => user_source(dir)?,
        None => debian_source(data, say)?,
    };
    let version = read_source(&source.join("Makefile"))
        .ok()
        .and_then(|m| makefile_version(&m))
        .unwrap_or_default();
    let name = match &req.name {
        Some(n) => n.clone(),
        None => {
            let major: String = version.split('.').take(2).collect::<Vec<_>>().join(".");
            let base = match req.revert {
                Some(s) => format!("{major}-revert-{}", s.name),
                None if req.switches => format!("{major}-switches"),
                None => major,
            };
            match req.profile {
                Profile::Desktop => base,
                p => format!("{base}-{}", p.name()),
            }
        }
    };
    kernels::check_name(&name).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    if let Some(s) = req.revert {
        // Checked before anything is built.
        let text = read_source(&source.join(s.file))?;
        revert(&text, s).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    }
    // No gcc: a key no build has, so the build below says what is missing.
    let compiler = run(Command::new("gcc").arg("--version"), "gcc --version")
        .map(|v| v.lines().next().unwrap_or_default().to_string())
        .unwrap_or_else(|_| "no gcc".into());
    if req.switches && req.revert.is_some() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "lab build: --revert and --switches are separate kernels; build one, then the other",
        ));
    }
    let key = key(&identity, req.revert, req.switches, req.profile, &compiler);
    let builds = builds_dir(data);
    trust::ensure_dir(&builds)?;
    // make runs in the tree with O= this path: it must not be relative.
    let builds = builds.canonicalize()?;
    let cache = builds.join(&key);
    let source_words = match req.revert {
        Some(s) => format!("{identity}, seed {} reverted ({})", s.name, s.what),
        None if req.switches => format!(
            "{identity}, readpath's lab patch (every seed a switch under {})",
            crate::kernel::switches::DIR
        ),
        None => identity.clone(),
    };
    let source_words = format!(
        "{source_words}; profile {} ({}, SCHED_MC, SCHED_SMT)",
        req.profile.name(),
        req.profile.preemption()
    );
    let mut make_time = Duration::ZERO;
    let cached = cache.join("vmlinuz").is_file() && cache.join("kernel.release").is_file();
    if cached {
        trust::check_dir(&cache)?;
        say(Progress::Step(format!(
            "{name}: built before (key {key}), taken from {}",
            cache.display()
        )));
    } else {
        check_tools()?;
        let _lock =
            trust::lock_exclusive(&builds.join(".lock"), Duration::from_secs(1)).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("another lab build is running in {} ({e})", builds.display()),
                )
            })?;
        sweep(&builds);
        let work = builds.join(format!(".{key}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&work);
        trust::ensure_dir(&work)?;
        let result = (|| -> io::Result<Duration> {
            let tree = match req.revert {
                Some(s) => {
                    say(Progress::Step(format!(
                        "a tree with seed {} reverted ({}; hard links to {})",
                        s.name,
                        s.file,
                        source.display()
                    )));
                    let t = work.join("tree");
                    reverted_tree(&source, s, &t)?;
                    t
                }
                None if req.switches => {
                    say(Progress::Step(format!(
                        "a tree with readpath's lab patch (assets/lab/readpath-switches.patch: {}; hard links to {})",
                        patched_files(SWITCHES_PATCH).join(", "),
                        source.display()
                    )));
                    let t = work.join("tree");
                    patched_tree(&source, &t, &work)?;
                    t
                }
                None => source.clone(),
            };
            let out = work.join("out");
            trust::ensure_dir(&out)?;
            configure(&tree, &out, req.profile, say)?;
            let lines_file = builds.join("make-lines");
            let total = trust::read_state_text(&lines_file, 64)
                .ok()
                .flatten()
                .and_then(|t| t.trim().parse::<u64>().ok())
                .filter(|n| (100..1_000_000).contains(n))
                .unwrap_or(MAKE_LINES_ESTIMATE);
            let jobs = if req.jobs == 0 {
                std::thread::available_parallelism().map_or(1, |n| n.get())
            } else {
                req.jobs
            };
            say(Progress::Step(format!(
                "make -j{jobs} bzImage (O={})",
                out.display()
            )));
            let (lines, took) = make(&tree, &out, jobs, total, say)?;
            let _ = trust::write_state(&lines_file, lines.to_string().as_bytes());
            let release = std::fs::read_to_string(out.join("include/config/kernel.release"))?
                .trim()
                .to_string();
            let done = work.join("done");
            trust::ensure_dir(&done)?;
            std::fs::rename(out.join("arch/x86/boot/bzImage"), done.join("vmlinuz"))?;
            std::fs::rename(out.join(".config"), done.join("config"))?;
            trust::write_state(&done.join("kernel.release"), release.as_bytes())?;
            let _ = std::fs::remove_dir_all(&cache);
            std::fs::rename(&done, &cache)?;
            Ok(took)
        })();
        // A stopped build leaves its directory (a tree of hard links takes
        // seconds to remove, and readpath ends within 2 s of a signal): the
        // next build sweeps it, as it does one a crash left.
        if !matches!(&result, Err(e) if e.kind() == io::ErrorKind::Interrupted) {
            let _ = std::fs::remove_dir_all(&work);
        }
        make_time = result?;
    }
    let release = trust::read_state_text(&cache.join("kernel.release"), 256)?
        .unwrap_or_default()
        .trim()
        .to_string();
    let info = KernelInfo {
        name: name.clone(),
        release,
        source: format!("built by readpath lab build from {source_words}"),
        version,
        reverted: req.revert.map(|s| s.name.to_string()).unwrap_or_default(),
        switches: if req.switches {
            crate::kernel::switches::SWITCHES
                .iter()
                .map(|s| s.name.to_string())
                .collect()
        } else {
            Vec::new()
        },
        profile: req.profile.name().to_string(),
        build_key: key.clone(),
    };
    let kernel = kernels::install(data, &name, &info, &mut |into| {
        std::fs::copy(cache.join("vmlinuz"), into.join("vmlinuz"))?;
        std::fs::copy(cache.join("config"), into.join("config"))?;
        Ok(())
    })?;
    Ok(Built {
        kernel,
        cached,
        key,
        make_time,
    })
}

/// Removes the work directories (`.KEY-PID`) of builds whose process is
/// gone: stopped by a signal, or crashed. Only names of that form, in the
/// lab's own builds directory, and only with the PID dead.
fn sweep(builds: &Path) {
    let Ok(entries) = std::fs::read_dir(builds) else {
        return;
    };
    for e in entries.filter_map(Result::ok) {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = work_dir_pid(&name) else {
            continue;
        };
        if pid != std::process::id() && !crate::sys::process_alive(pid) {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// The PID in a build's work directory name `.KEY-PID` (KEY 16 hex
/// digits).
fn work_dir_pid(name: &str) -> Option<u32> {
    let (key, pid) = name.strip_prefix('.')?.split_once('-')?;
    (key.len() == 16 && key.chars().all(|c| c.is_ascii_hexdigit()))
        .then(|| pid.parse().ok())
        .flatten()
}

/// `make tinyconfig`, the fragment merged, `make olddefconfig`, and every
/// option of the fragment checked in the result.
fn configure(
    tree: &Path,
    out: &Path,
    profile: Profile,
    say: &mut dyn FnMut(Progress),
) -> io::Result<()> {
    say(Progress::Step(format!(
        "make tinyconfig, then the lab's fragment (assets/lab/lab.config) and profile {}'s (assets/lab/profile-{}.config)",
        profile.name(),
        profile.name()
    )));
    let o = format!("O={}", out.display());
    process::polled(
        Command::new("make")
            .arg("-C")
            .arg(tree)
            .arg(&o)
            .arg("tinyconfig"),
        "make tinyconfig",
        &mut |_| {},
    )?;
    let fragment = out.join("lab.config");
    trust::create_new(&fragment, 0o644)?
        .write_all(format!("{FRAGMENT}\n{}", profile.fragment()).as_bytes())?;
    process::polled(
        Command::new(tree.join("scripts/kconfig/merge_config.sh"))
            .arg("-m")
            .arg("-O")
            .arg(out)
            .arg(out.join(".config"))
            .arg(&fragment)
            .current_dir(tree),
        "merge_config.sh",
        &mut |_| {},
    )?;
    process::polled(
        Command::new("make")
            .arg("-C")
            .arg(tree)
            .arg(&o)
            .arg("olddefconfig"),
        "make olddefconfig",
        &mut |_| {},
    )?;
    let config = std::fs::read_to_string(out.join(".config"))?;
    let missing = missing_options(&config, profile);
    if !missing.is_empty() {
        return Err(io::Error::other(format!(
            "this tree's configuration lacks what the lab needs: {} (not in the final .config after make olddefconfig)",
            missing.join(", ")
        )));
    }
    Ok(())
}

/// `make -jN bzImage`, its lines counted for progress. Returns (lines,
/// time).
fn make(
    tree: &Path,
    out: &Path,
    jobs: usize,
    total: u64,
    say: &mut dyn FnMut(Progress),
) -> io::Result<(u64, Duration)> {
    let started = Instant::now();
    let mut done = 0u64;
    let mut last_say = Instant::now() - Duration::from_secs(1);
    process::polled(
        Command::new("make")
            .arg("-C")
            .arg(tree)
            .arg(format!("O={}", out.display()))
            .arg(format!("-j{jobs}"))
            .arg("bzImage"),
        "make bzImage",
        &mut |line| {
            done += 1;
            if last_say.elapsed() >= Duration::from_millis(200) {
                last_say = Instant::now();
                say(Progress::Make {
                    done,
                    total: total.max(done),
                    what: line.trim().to_string(),
                    elapsed: started.elapsed(),
                });
            }
        },
    )?;
    let took = started.elapsed();
    say(Progress::Make {
        done,
        total: done,
        what: "done".into(),
        elapsed: took,
    });
    Ok((done, took))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lines of Debian's 6.1.192 each seed's revert is made on, as
    /// they are there (tabs included).
    const VERIFY_C: &str = "\t */\n\tfsverity_read_workqueue = alloc_workqueue(\"fsverity_read_queue\",\n\t\t\t\t\t\t  WQ_HIGHPRI,\n\t\t\t\t\t\t  num_online_cpus());\n";
    const CRYPTO_C: &str = "\tfscrypt_read_workqueue = alloc_workqueue(\"fscrypt_read_queue\",\n\t\t\t\t\t\t WQ_UNBOUND | WQ_HIGHPRI,\n\t\t\t\t\t\t num_online_cpus());\n\tif (!fscrypt_read_workqueue)\n";
    const IO_URING_C: &str = "\tio_wait = current->in_iowait;\n\tif (current_pending_io())\n\t\tcurrent->in_iowait = 1;\n\tret = 1;\n";

    #[test]
    fn each_seed_is_reverted_to_the_text_before_it() {
        let v = revert(VERIFY_C, seed("fsverity-2023").unwrap()).unwrap();
        assert!(v.contains("\"fsverity_read_queue\",\n\t\t\t\t\t\t  WQ_UNBOUND | WQ_HIGHPRI,"));
        assert!(v.contains("num_online_cpus());"));
        let c = revert(CRYPTO_C, seed("fscrypt-2018").unwrap()).unwrap();
        assert!(c.contains("\"fscrypt_read_queue\",\n\t\t\t\t\t\t WQ_HIGHPRI, 0);"));
        assert!(!c.contains("WQ_UNBOUND"));
        assert!(c.ends_with("\tif (!fscrypt_read_workqueue)\n"));
        let u = revert(IO_URING_C, seed("io_uring-2023").unwrap()).unwrap();
        assert!(u.contains("\tif (0 && current_pending_io())"));
        // A reverted text is not reverted twice, and a foreign one is
        // refused.
        let e = revert(&v, seed("fsverity-2023").unwrap())
            .unwrap_err()
            .to_string();
        assert!(e.contains("already reverted"), "{e}");
        let e = revert("int x;\n", seed("fscrypt-2018").unwrap())
            .unwrap_err()
            .to_string();
        assert!(e.contains("found 0 times"), "{e}");
        let twice = format!("{IO_URING_C}{IO_URING_C}");
        assert!(
            revert(&twice, seed("io_uring-2023").unwrap())
                .unwrap_err()
                .to_string()
                .contains("2 times")
        );
        assert!(
            seed("fsverity")
                .unwrap_err()
                .to_string()
                .contains("allowed fsverity-2023, fscrypt-2018, io_uring-2023")
        );
    }

    #[test]
    fn every_seed_takes_its_published_result_from_its_preset() {
        for sd in SEEDS {
            let p = crate::scenario::preset::shipped(sd.preset).unwrap();
            let c = p.compare.unwrap();
            assert_eq!(c.key, sd.setting.0.name(), "{}", sd.name);
            let (b, a) = (sd.setting.1.to_string(), sd.setting.2.to_string());
            assert!(
                c.values[..2] == [b.clone(), a.clone()] || c.values[..2] == [a, b],
                "{}: the seed's before/after are the preset's first two values",
                sd.name
            );
            assert!(p.published.is_some(), "{}", sd.name);
        }
        // fs-verity: unbound -> bound, as the preset runs it.
        assert_eq!(seed("fsverity-2023").unwrap().published().figure(), "-96%");
        // io_uring: the preset runs iowait -> plain (-20..-40% IOPS); the
        // seed reverted is plain, so before -> after is plain -> iowait.
        assert_eq!(
            seed("io_uring-2023").unwrap().published().figure(),
            "+25..+67%"
        );
        assert_eq!(seed("fscrypt-2018").unwrap().published().sign(), 1);
    }

    #[test]
    fn every_seed_names_a_patch_that_is_shipped_beside_the_project() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/seeds");
        if !dir.is_dir() {
            return; // a checkout without the shared seeds
        }
        for s in SEEDS {
            assert!(dir.join(s.patch).is_file(), "{}", s.patch);
        }
    }

    #[test]
    fn the_key_changes_with_every_input() {
        let s = seed("fsverity-2023").unwrap();
        let base = key(
            "Debian linux-source-6.1 6.1.192-3",
            None,
            false,
            Profile::Desktop,
            "gcc 12.2.0",
        );
        assert_eq!(base.len(), 16);
        assert_eq!(
            base,
            key(
                "Debian linux-source-6.1 6.1.192-3",
                None,
                false,
                Profile::Desktop,
                "gcc 12.2.0"
            )
        );
        for other in [
            key(
                "Debian linux-source-6.1 6.1.192-2",
                None,
                false,
                Profile::Desktop,
                "gcc 12.2.0",
            ),
            key(
                "Debian linux-source-6.1 6.1.192-3",
                Some(s),
                false,
                Profile::Desktop,
                "gcc 12.2.0",
            ),
            key(
                "Debian linux-source-6.1 6.1.192-3",
                None,
                true,
                Profile::Desktop,
                "gcc 12.2.0",
            ),
            key(
                "Debian linux-source-6.1 6.1.192-3",
                None,
                false,
                Profile::Phone,
                "gcc 12.2.0",
            ),
            key(
                "Debian linux-source-6.1 6.1.192-3",
                None,
                false,
                Profile::Desktop,
                "gcc 13",
            ),
        ] {
            assert_ne!(base, other);
        }
    }

    #[test]
    fn options_the_final_config_lacks_are_named() {
        let all: String = FRAGMENT
            .lines()
            .filter(|l| l.starts_with("CONFIG_"))
            .map(|l| format!("{l}\n"))
            .collect();
        let all = format!("{all}CONFIG_PREEMPT_VOLUNTARY=y\n");
        assert!(missing_options(&all, Profile::Desktop).is_empty());
        assert_eq!(
            missing_options(&all, Profile::Phone),
            vec!["CONFIG_PREEMPT=y"]
        );
        assert!(all.contains("CONFIG_SCHED_MC=y\n") && all.contains("CONFIG_SCHED_SMT=y\n"));
        let without = all.replace("CONFIG_FS_VERITY=y\n", "# CONFIG_FS_VERITY is not set\n");
        assert_eq!(
            missing_options(&without, Profile::Desktop),
            vec!["CONFIG_FS_VERITY=y"]
        );
    }

    /// A tree that looks like a kernel's to `lab build` (its Makefile and
    /// the seeds' files), which make could not build.
    fn fake_tree(dir: &Path) {
        std::fs::write(
            dir.join("Makefile"),
            "VERSION = 6\nPATCHLEVEL = 1\nSUBLEVEL = 192\nEXTRAVERSION =\n",
        )
        .unwrap();
        for (file, text) in [
            ("fs/verity/verify.c", VERIFY_C),
            ("fs/crypto/crypto.c", CRYPTO_C),
            ("io_uring/io_uring.c", IO_URING_C),
        ] {
            let f = dir.join(file);
            std::fs::create_dir_all(f.parent().unwrap()).unwrap();
            std::fs::write(f, text).unwrap();
        }
    }

    #[test]
    fn a_build_already_made_is_taken_from_the_cache_and_installed() {
        let data = tempfile::tempdir().unwrap();
        let tree = tempfile::tempdir().unwrap();
        fake_tree(tree.path());
        let (_, identity) = user_source(tree.path()).unwrap();
        assert!(identity.contains("Linux 6.1.192"), "{identity}");
        let compiler = run(Command::new("gcc").arg("--version"), "gcc")
            .map(|v| v.lines().next().unwrap_or_default().to_string())
            .unwrap_or_else(|_| "no gcc".into());
        let s = seed("fsverity-2023").unwrap();
        let k = key(&identity, Some(s), false, Profile::Desktop, &compiler);
        let cache = builds_dir(data.path()).join(&k);
        trust::ensure_dir(&cache).unwrap();
        std::fs::write(cache.join("vmlinuz"), b"bzImage").unwrap();
        std::fs::write(cache.join("config"), b"CONFIG_FS_VERITY=y\n").unwrap();
        std::fs::write(cache.join("kernel.release"), b"6.1.192\n").unwrap();
        let mut said = Vec::new();
        let built = build(
            data.path(),
            &Request {
                source: Some(tree.path().to_path_buf()),
                revert: Some(s),
                switches: false,
                profile: Profile::Desktop,
                name: None,
                jobs: 1,
            },
            &mut |p| said.push(p),
        )
        .unwrap();
        assert!(built.cached);
        assert_eq!(built.key, k);
        assert_eq!(built.kernel.info.name, "6.1-revert-fsverity-2023");
        assert_eq!(built.kernel.info.reverted, "fsverity-2023");
        assert_eq!(built.kernel.info.release, "6.1.192");
        assert_eq!(std::fs::read(built.kernel.image()).unwrap(), b"bzImage");
        assert!(matches!(&said[..], [Progress::Step(m)] if m.contains("built before")));
        // The tree was not written: its seed is still there.
        assert_eq!(
            std::fs::read_to_string(tree.path().join(s.file)).unwrap(),
            VERIFY_C
        );
        // A tree configured in place is refused, naming the fix.
        std::fs::write(tree.path().join(".config"), "").unwrap();
        let e = user_source(tree.path()).unwrap_err().to_string();
        assert!(e.contains("make mrproper"), "{e}");
    }

    #[test]
    fn a_reverted_tree_is_linked_and_only_the_seeds_file_is_new() {
        let src = tempfile::tempdir().unwrap();
        fake_tree(src.path());
        let out = tempfile::tempdir().unwrap();
        let into = out.path().join("tree");
        let s = seed("fscrypt-2018").unwrap();
        reverted_tree(src.path(), s, &into).unwrap();
        let got = std::fs::read_to_string(into.join(s.file)).unwrap();
        assert!(got.contains("WQ_HIGHPRI, 0);"), "{got}");
        assert_eq!(
            std::fs::read_to_string(src.path().join(s.file)).unwrap(),
            CRYPTO_C,
            "the source's file must stay as it was"
        );
        assert_eq!(
            std::fs::read_to_string(into.join("fs/verity/verify.c")).unwrap(),
            VERIFY_C
        );
    }

    #[test]
    fn only_a_build_work_dir_names_a_pid() {
        assert_eq!(work_dir_pid(".257e9d704a636351-326"), Some(326));
        for other in [
            "257e9d704a636351-326",
            ".lock",
            ".257e9d70-1",
            ".257e9d704a636351-x",
            "make-lines",
        ] {
            assert_eq!(work_dir_pid(other), None, "{other}");
        }
    }

    #[test]
    fn a_kernel_makefile_gives_its_version() {
        let m = "# SPDX\nVERSION = 6\nPATCHLEVEL = 1\nSUBLEVEL = 192\nEXTRAVERSION =\n";
        assert_eq!(makefile_version(m).as_deref(), Some("6.1.192"));
        assert_eq!(makefile_version("VERSION = 6\n"), None);
        assert_eq!(
            makefile_version("VERSION = 6\nPATCHLEVEL = x\nSUBLEVEL = 1\n"),
            None
        );
    }
}
