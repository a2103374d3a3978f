//! The lab's kernels: where each lives in the data dir, what it is, and
//! how one arrives (`readpath lab fetch`: Debian's own kernel package,
//! through the system's package tool, unpacked without installing it).
//!
//! A kernel is a directory `lab/kernels/NAME/` holding `vmlinuz`, its
//! modules (`modules/`, the package's `lib/modules/VERSION`, where it has
//! any) and `kernel.toml` saying what it is. Nothing is installed on the
//! machine and nothing outside the data dir is written; a fetch is
//! unpacked into a fresh directory of its own and only renamed into place
//! once whole, so an interrupted fetch never leaves half a kernel under a
//! kernel's name.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::{Deserialize, Serialize};

use super::process;
use crate::files::{Expect, InputError, Named};
use crate::sys::trust;

/// What a lab kernel is (`kernel.toml`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelInfo {
    /// Its name in the lab (`debian-6.1`).
    pub name: String,
    /// Its release, as `uname -r` will say it (`6.1.0-57-cloud-amd64`).
    pub release: String,
    /// Where it came from, in words (`Debian package
    /// linux-image-6.1.0-57-cloud-amd64-unsigned 6.1.192-3`).
    pub source: String,
    /// The upstream version where known (`6.1.192`).
    #[serde(default)]
    pub version: String,
    /// The seed reverted in it (`fsverity-2023`), for a kernel `lab build`
    /// made with `--revert`; empty otherwise.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reverted: String,
    /// The lab patch's switches it has (under
    /// `/sys/module/readpath/parameters/`), for a kernel `lab build` made
    /// with `--switches`; empty otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub switches: Vec<String>,
    /// The profile it was built with (`desktop`, `phone`), for a kernel
    /// `lab build` made; empty for a fetched one.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub profile: String,
    /// The key of the `lab build` that made it; empty for a fetched one.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub build_key: String,
}

/// A kernel in the lab, ready to boot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kernel {
    /// What it is.
    pub info: KernelInfo,
    /// Its directory.
    pub dir: PathBuf,
}

impl Kernel {
    /// The bzImage.
    pub fn image(&self) -> PathBuf {
        self.dir.join("vmlinuz")
    }

    /// Its modules' tree (`lib/modules/RELEASE`), where it has one: a
    /// directory of its own, not a link to another.
    pub fn modules(&self) -> Option<PathBuf> {
        let m = self.dir.join("modules");
        std::fs::symlink_metadata(&m)
            .is_ok_and(|t| t.is_dir())
            .then_some(m)
    }
}

/// Kernels `lab fetch` knows how to get: (name, what it is).
pub const FETCHABLE: &[(&str, &str)] = &[(
    "debian-6.1",
    "Debian 12's cloud kernel (linux-image-6.1.0-N-cloud-amd64-unsigned, the newest the configured mirror has): fs-verity, fscrypt, io_uring, ftrace, schedstats, cgroup v2, AF_ALG as modules; all three seed changes in",
)];

/// The lab's directory in data dir `data`.
pub fn lab_dir(data: &Path) -> PathBuf {
    data.join("lab")
}

fn kernels_dir(data: &Path) -> PathBuf {
    lab_dir(data).join("kernels")
}

/// A lab kernel's name: 1-64 of `[A-Za-z0-9._-]`, not starting with `.`
/// or `-`.
pub fn check_name(name: &str) -> Result<(), BadName> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with(['.', '-'])
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if ok {
        Ok(())
    } else {
        Err(BadName {
            name: name.to_string(),
        })
    }
}

/// A lab kernel name that breaks the name rule ([`check_name`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "lab kernel {:?}: allowed 1-64 letters, digits, '.', '_' or '-', not starting with '.' or '-'",
    crate::sys::printable(name, false)
)]
pub struct BadName {
    /// The name as given.
    pub name: String,
}

/// A field of a kernel's `kernel.toml` that readpath did not write
/// ([`check_info`]): the key, the value (its first 120 characters, shown
/// printable) and what is allowed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key} = {:?}: allowed {allowed}", crate::sys::printable(value, false))]
pub struct BadInfo {
    /// The key.
    pub key: &'static str,
    /// Its value, at most 120 characters of it.
    pub value: String,
    /// What is allowed.
    pub allowed: String,
}

/// The most characters `kernel.toml`'s `source` may hold (a path to a
/// bzImage, `PATH_MAX`, and the words around it).
pub const SOURCE_CAP: usize = 4200;

/// Checks every field of a kernel's `kernel.toml` (`info`) for kernel
/// directory `dir_name`, as the command line's values are checked: what
/// goes into QEMU's arguments and file names (`name`) passes the lab's
/// name rule and is the directory's own name; the rest is held to what
/// readpath writes there. The error names the key, the value and what is
/// allowed: `name = "k,file=victim": allowed ...`.
pub fn check_info(dir_name: &str, info: &KernelInfo) -> Result<(), BadInfo> {
    let bad = |key: &'static str, value: &str, allowed: &str| {
        Err(BadInfo {
            key,
            value: value.chars().take(120).collect(),
            allowed: allowed.to_string(),
        })
    };
    // uname -r's and a version's characters.
    let word = |v: &str, empty_ok: bool| {
        (empty_ok || !v.is_empty())
            && v.len() <= 64
            && v.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '+' | '~'))
    };
    if check_name(&info.name).is_err() || info.name != dir_name {
        return bad(
            "name",
            &info.name,
            &format!(
                "the kernel's directory name ({dir_name:?}): 1-64 letters, digits, '.', '_' or '-', not starting with '.' or '-'"
            ),
        );
    }
    if !word(&info.release, false) {
        return bad(
            "release",
            &info.release,
            "1-64 letters, digits, '.', '_', '-', '+' or '~' (as `uname -r` says it)",
        );
    }
    if !word(&info.version, true) {
        return bad(
            "version",
            &info.version,
            "at most 64 letters, digits, '.', '_', '-', '+' or '~'",
        );
    }
    if info.source.is_empty()
        || info.source.chars().count() > SOURCE_CAP
        || info.source.chars().any(char::is_control)
    {
        return bad(
            "source",
            &info.source,
            &format!("1-{SOURCE_CAP} characters, none of them a control character"),
        );
    }
    if !info.reverted.is_empty() && check_name(&info.reverted).is_err() {
        return bad(
            "reverted",
            &info.reverted,
            "empty or a seed's name (1-64 letters, digits, '.', '_' or '-')",
        );
    }
    if let Some(s) = info
        .switches
        .iter()
        .find(|s| crate::kernel::switches::switch(s).is_none())
    {
        return bad(
            "switches",
            s,
            &format!(
                "the lab patch's switches: {}",
                crate::kernel::switches::SWITCHES
                    .iter()
                    .map(|s| s.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        );
    }
    if info.switches.len() > crate::kernel::switches::SWITCHES.len() {
        return bad("switches", "(list)", "each switch at most once");
    }
    if !(info.profile.is_empty() || Profile::parse(&info.profile).is_ok()) {
        return bad("profile", &info.profile, "empty, desktop or phone");
    }
    if !(info.build_key.is_empty()
        || info.build_key.len() == 16 && info.build_key.bytes().all(|b| b.is_ascii_hexdigit()))
    {
        return bad(
            "build_key",
            &info.build_key,
            "empty or 16 hexadecimal digits (a `lab build` key)",
        );
    }
    Ok(())
}

/// The choices that decide where work runs, as on the machines the seeds
/// came from; merged after [`FRAGMENT`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Profile {
    /// Debian's 6.1: voluntary preemption (the default).
    #[default]
    Desktop,
    /// Android's GKI kernels: full preemption.
    Phone,
}

impl Profile {
    /// Every profile, the default first.
    pub const ALL: [Profile; 2] = [Profile::Desktop, Profile::Phone];

    /// Its name (`desktop`).
    pub fn name(self) -> &'static str {
        match self {
            Profile::Desktop => "desktop",
            Profile::Phone => "phone",
        }
    }

    /// Its configuration fragment.
    pub fn fragment(self) -> &'static str {
        match self {
            Profile::Desktop => include_str!("../../assets/lab/profile-desktop.config"),
            Profile::Phone => include_str!("../../assets/lab/profile-phone.config"),
        }
    }

    /// Its preemption model, in words (for the kernel's description).
    pub fn preemption(self) -> &'static str {
        match self {
            Profile::Desktop => "voluntary preemption",
            Profile::Phone => "full preemption",
        }
    }

    /// Profile `name`, or an error naming those allowed.
    pub fn parse(name: &str) -> Result<Profile, UnknownProfile> {
        Profile::ALL
            .into_iter()
            .find(|p| p.name() == name)
            .ok_or_else(|| UnknownProfile {
                name: name.to_string(),
            })
    }
}

/// A `lab build --profile` that is none of the profiles.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "lab build --profile {:?}: allowed desktop, phone",
    crate::sys::printable(name, false)
)]
pub struct UnknownProfile {
    /// The name as given.
    pub name: String,
}

/// The kernels in the lab, by name.
pub fn list(data: &Path) -> io::Result<Vec<Kernel>> {
    let dir = kernels_dir(data);
    let mut out = Vec::new();
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(e),
    };
    trust::check_dir(&dir)?;
    for e in entries {
        let e = e?;
        let name = e.file_name().to_string_lossy().into_owned();
        if check_name(&name).is_err() || !e.file_type()?.is_dir() {
            continue;
        }
        if let Ok(k) = open(data, &name) {
            out.push(k);
        }
    }
    out.sort_by(|a, b| a.info.name.cmp(&b.info.name));
    Ok(out)
}

/// Lab kernel `name`: its directory checked (the user's or root's,
/// writable by no one else), its `kernel.toml` read as a state file and
/// every field of it checked ([`check_info`]: `InvalidInput` naming the
/// file, the key, the value and what is allowed), its image a regular
/// file of the user's.
pub fn open(data: &Path, name: &str) -> io::Result<Kernel> {
    check_name(name).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let dir = kernels_dir(data).join(name);
    if !dir.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!(
                "no lab kernel {name:?} in {} (`readpath lab kernels` lists them; `readpath lab fetch debian-6.1` gets one)",
                lab_dir(data).display()
            ),
        ));
    }
    trust::check_dir(&dir)?;
    let text =
        trust::read_state_text(&dir.join("kernel.toml"), trust::STATE_CAP)?.ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("{}: no kernel.toml", dir.display()),
            )
        })?;
    let file = dir.join("kernel.toml");
    let shown = || crate::sys::printable(&file.display().to_string(), false);
    let info: KernelInfo = toml::from_str(&text)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("{}: {e}", shown())))?;
    check_info(name, &info)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("{}: {e}", shown())))?;
    trust::open_own_file(&dir.join("vmlinuz"), 0)?;
    Ok(Kernel { info, dir })
}

/// The newest package of `prefix` + N + `suffix` that `apt-cache search`
/// lists: (package, N).
fn newest_package(list: &str, prefix: &str, suffix: &str) -> Option<(String, u32)> {
    list.lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter_map(|p| {
            let n = p.strip_prefix(prefix)?.strip_suffix(suffix)?;
            Some((p.to_string(), n.parse::<u32>().ok()?))
        })
        .max_by_key(|(_, n)| *n)
}

/// Downloads Debian package `spec` (`NAME` or `NAME=VERSION`) into
/// directory `work` with `apt-get download` (from the mirror the system is
/// configured with; a stop signal ends it within 100 ms): the `.deb`.
pub(super) fn apt_download(work: &Path, spec: &str) -> io::Result<PathBuf> {
    process::polled(
        Command::new("apt-get")
            .arg("download")
            .arg(spec)
            .current_dir(work),
        "apt-get download",
        &mut |_| {},
    )?;
    std::fs::read_dir(work)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "deb"))
        .ok_or_else(|| io::Error::other("apt-get download left no .deb"))
}

/// [`crate::kernel::run_tool`], its error led by `what`.
pub(super) fn run(cmd: &mut Command, what: &str) -> io::Result<String> {
    crate::kernel::run_tool(cmd).map_err(|e| io::Error::new(e.kind(), format!("{what}: {e}")))
}

/// Fetches kernel `name` (one of [`FETCHABLE`]) into the lab: Debian's
/// package with `apt-get download` (from the mirror the system is
/// configured with), unpacked with `dpkg-deb -x` into a fresh directory,
/// the image and modules moved to their places, `kernel.toml` written,
/// then renamed into place (an older one of the same name is replaced
/// only then). `say` hears each step.
pub fn fetch(data: &Path, name: &str, say: &mut dyn FnMut(&str)) -> io::Result<Kernel> {
    if !FETCHABLE.iter().any(|(n, _)| *n == name) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "lab fetch {name:?}: allowed {}",
                FETCHABLE
                    .iter()
                    .map(|(n, _)| *n)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ));
    }
    let (prefix, suffix) = ("linux-image-6.1.0-", "-cloud-amd64-unsigned");
    say("looking for the newest linux-image-6.1.0-N-cloud-amd64-unsigned (apt-cache search)");
    let list = run(
        Command::new("apt-cache").args([
            "search",
            "--names-only",
            "^linux-image-6.1.0-[0-9]+-cloud-amd64-unsigned$",
        ]),
        "apt-cache search",
    )
    .map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("{e} (Debian's apt is needed to fetch {name})"),
        )
    })?;
    let (package, n) = newest_package(&list, prefix, suffix).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::NotFound,
            "apt-cache lists no linux-image-6.1.0-N-cloud-amd64-unsigned (run `apt-get update`, or add Debian 12's main component)",
        )
    })?;
    let kernels = kernels_dir(data);
    trust::ensure_dir(&kernels)?;
    let work = kernels.join(format!(".fetch-{}-{}", std::process::id(), random_suffix()));
    trust::ensure_dir(&work)?;
    let result = (|| -> io::Result<()> {
        say(&format!("downloading {package} (apt-get download)"));
        let deb = apt_download(&work, &package)?;
        let pkg_version = run(
            Command::new("dpkg-deb")
                .args(["-f"])
                .arg(&deb)
                .arg("Version"),
            "dpkg-deb -f",
        )?
        .trim()
        .to_string();
        say(&format!("unpacking {} (dpkg-deb -x)", deb.display()));
        let root = work.join("root");
        run(
            Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&root),
            "dpkg-deb -x",
        )?;
        let release = format!("6.1.0-{n}-cloud-amd64");
        let info = KernelInfo {
            name: name.to_string(),
            release: release.clone(),
            source: format!("Debian package {package} {pkg_version}"),
            version: pkg_version
                .split('-')
                .next()
                .unwrap_or_default()
                .to_string(),
            reverted: String::new(),
            switches: Vec::new(),
            profile: String::new(),
            build_key: String::new(),
        };
        install(data, name, &info, &mut |into| {
            std::fs::rename(
                root.join(format!("boot/vmlinuz-{release}")),
                into.join("vmlinuz"),
            )?;
            std::fs::rename(
                root.join(format!("lib/modules/{release}")),
                into.join("modules"),
            )?;
            let _ = std::fs::rename(
                root.join(format!("boot/config-{release}")),
                into.join("config"),
            );
            Ok(())
        })?;
        Ok(())
    })();
    let _ = std::fs::remove_dir_all(&work);
    result?;
    open(data, name)
}

/// The release a bzImage names in its setup header (`kernel_version`: a
/// pointer at 0x20E to a NUL-terminated string, 0x200 further), checked
/// to be a bzImage first (`HdrS` at 0x202): its first word, e.g.
/// `6.1.192`.
pub fn bzimage_release(head: &[u8]) -> Result<String, NotABzImage> {
    if head.get(0x202..0x206) != Some(b"HdrS") {
        return Err(NotABzImage::NoHeader);
    }
    let at = head
        .get(0x20E..0x210)
        .map(|b| u16::from_le_bytes([b[0], b[1]]) as usize + 0x200)
        .ok_or(NotABzImage::CutShort)?;
    let text = head
        .get(at..)
        .and_then(|t| t.split(|b| *b == 0).next())
        .ok_or(NotABzImage::PastHeader)?;
    let release = String::from_utf8_lossy(text)
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string();
    if release.is_empty() || release.len() > 64 {
        return Err(NotABzImage::BadVersion);
    }
    Ok(crate::sys::printable(&release, false))
}

/// Why bytes are not a bzImage whose release can be read
/// ([`bzimage_release`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NotABzImage {
    /// No `HdrS` at 0x202.
    #[error("not a bzImage (no \"HdrS\" setup header at 0x202)")]
    NoHeader,
    /// Shorter than the setup header.
    #[error("a bzImage header cut short")]
    CutShort,
    /// `kernel_version` points beyond the bytes.
    #[error("its kernel_version points past the header")]
    PastHeader,
    /// An empty or over-long `kernel_version`.
    #[error("its kernel_version string is empty or too long")]
    BadVersion,
}

/// The largest bzImage `--remote vm:PATH` takes.
pub const IMAGE_CAP: u64 = 256 << 20;

/// What `vm:PATH` names: a regular file of at most [`IMAGE_CAP`].
const IMAGE: Expect = Expect {
    what: "a kernel image (bzImage)",
    cap: IMAGE_CAP,
};

/// The bzImage at `path` (named by the user: a link is followed) and
/// the release its header names, read through [`crate::files::read_file`]:
/// a regular file (not a FIFO, a device, a directory or a file of /proc)
/// of at most [`IMAGE_CAP`], with a bzImage's setup header. Messages name
/// it `name`.
pub fn read_image(path: &Path, name: &str) -> Result<(Vec<u8>, String), InputError> {
    let bytes = crate::files::read_file(path, Named::ByUser, IMAGE, name)?;
    let release = bzimage_release(&bytes).map_err(|why| InputError::Refused {
        name: crate::sys::printable(name, false),
        why: why.to_string(),
    })?;
    Ok((bytes, release))
}

/// Checks `vm:PATH`'s image before anything is made (the command's own
/// check, so that a bad path is refused once, as bad input): what
/// [`read_image`] refuses.
pub fn check_image(path: &Path) -> Result<(), InputError> {
    read_image(path, &format!("vm:{}", path.display())).map(|_| ())
}

/// The bzImage at `path` as lab kernel `name` (`img-HASH`): read by
/// [`read_image`], copied in and installed anew, its release from its
/// header. Errors name the path (the caller says which guest).
pub fn import_image(data: &Path, name: &str, path: &Path) -> io::Result<Kernel> {
    let shown = crate::sys::printable(&path.display().to_string(), false);
    let (bytes, release) = read_image(path, &shown)?;
    let info = KernelInfo {
        name: name.to_string(),
        release: release.clone(),
        source: format!("bzImage {shown}"),
        version: release
            .split(['-', '+'])
            .next()
            .unwrap_or_default()
            .to_string(),
        ..Default::default()
    };
    install(data, name, &info, &mut |into| {
        trust::create_new(&into.join("vmlinuz"), 0o644)?.write_all(&bytes)
    })
}

/// Installs kernel `name`: a fresh directory beside the kernels, filled
/// by `fill` (the image, modules, config), `kernel.toml` written from
/// `info`, then renamed into place; an older kernel of that name is
/// replaced only then, so an interrupted install never leaves half a
/// kernel under a kernel's name.
pub fn install(
    data: &Path,
    name: &str,
    info: &KernelInfo,
    fill: &mut dyn FnMut(&Path) -> io::Result<()>,
) -> io::Result<Kernel> {
    check_name(name).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let kernels = kernels_dir(data);
    trust::ensure_dir(&kernels)?;
    let into = kernels.join(format!(".new-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&into);
    trust::ensure_dir(&into)?;
    let result = (|| -> io::Result<()> {
        fill(&into)?;
        trust::write_state(
            &into.join("kernel.toml"),
            toml::to_string(info).map_err(io::Error::other)?.as_bytes(),
        )?;
        let dest = kernels.join(name);
        if dest.exists() {
            let old = kernels.join(format!(".old-{name}-{}", random_suffix()));
            std::fs::rename(&dest, &old)?;
            let _ = std::fs::remove_dir_all(&old);
        }
        std::fs::rename(&into, &dest)
    })();
    if result.is_err() {
        let _ = std::fs::remove_dir_all(&into);
    }
    result?;
    open(data, name)
}

fn random_suffix() -> String {
    format!(
        "{:08x}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos())
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newest_package_is_chosen_by_its_number_not_its_text() {
        let list = "linux-image-6.1.0-9-cloud-amd64-unsigned - Linux 6.1 for x86-64 cloud\n\
                    linux-image-6.1.0-57-cloud-amd64-unsigned - Linux 6.1 for x86-64 cloud\n\
                    linux-image-6.1.0-100-cloud-amd64-unsigned-dbg - debug\n\
                    linux-image-6.1.0-56-cloud-amd64-unsigned - Linux 6.1 for x86-64 cloud\n";
        assert_eq!(
            newest_package(list, "linux-image-6.1.0-", "-cloud-amd64-unsigned"),
            Some(("linux-image-6.1.0-57-cloud-amd64-unsigned".into(), 57))
        );
        assert_eq!(newest_package("", "a", "b"), None);
    }

    #[test]
    fn a_bzimage_names_its_release_and_anything_else_is_refused() {
        let mut head = vec![0u8; 0x400];
        head[0x202..0x206].copy_from_slice(b"HdrS");
        head[0x20E..0x210].copy_from_slice(&0x100u16.to_le_bytes());
        head[0x300..0x300 + 40].copy_from_slice(b"6.1.192 (root@vm) #1 SMP Sat Dec  5\0\0\0\0\0");
        assert_eq!(bzimage_release(&head).as_deref(), Ok("6.1.192"));
        let data = tempfile::tempdir().unwrap();
        let img = data.path().join("bzImage");
        std::fs::write(&img, &head).unwrap();
        let k = import_image(data.path(), "img-000000000000", &img).unwrap();
        assert_eq!(k.info.release, "6.1.192");
        assert_eq!(std::fs::read(k.image()).unwrap(), head);
        assert!(
            bzimage_release(&[0u8; 0x400])
                .unwrap_err()
                .to_string()
                .contains("not a bzImage")
        );
        std::fs::write(&img, b"#!/bin/sh\n").unwrap();
        let e = import_image(data.path(), "img-000000000000", &img).unwrap_err();
        assert!(e.to_string().contains("not a bzImage"), "{e}");
        let e = import_image(data.path(), "img-000000000000", data.path()).unwrap_err();
        assert!(e.to_string().contains("is a directory"), "{e}");
    }

    #[test]
    fn a_kernel_image_that_is_no_regular_file_is_refused_unread() {
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("fifo");
        crate::sys::make_fifo(&fifo, 0o600).unwrap();
        let big = d.path().join("big");
        std::fs::File::create(&big)
            .unwrap()
            .set_len(IMAGE_CAP + 1)
            .unwrap();
        for (path, why) in [
            // Read to 2.1 GB before: a "regular file" of size 0.
            (
                Path::new("/proc/self/pagemap"),
                "is a file of procfs, a kernel interface, not a kernel image (bzImage)",
            ),
            (
                Path::new("/dev/zero"),
                "is a character device (1:5); a kernel image (bzImage) is read only from a regular file",
            ),
            (
                &fifo,
                "is a FIFO; a kernel image (bzImage) is read only from a regular file",
            ),
            (
                &big,
                "is 268435457 bytes; a kernel image (bzImage) is at most 256 MiB",
            ),
        ] {
            let e = check_image(path).unwrap_err();
            assert!(e.is_bad_input(), "{e}");
            // Named once, as the user wrote it.
            assert_eq!(e.to_string(), format!("vm:{}: {why}", path.display()));
            let e = import_image(d.path(), "img-000000000000", path).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{e}");
        }
        let e = check_image(&d.path().join("none")).unwrap_err();
        assert!(e.is_not_found(), "{e}");
    }

    #[test]
    fn kernel_names_are_checked() {
        for ok in ["debian-6.1", "6.1-revert-fsverity-2023", "a"] {
            assert!(check_name(ok).is_ok(), "{ok}");
        }
        for bad in ["", "../x", "-x", ".x", "a/b", "a b", &"x".repeat(65)] {
            let e = check_name(bad).unwrap_err().to_string();
            assert!(e.contains("allowed"), "{e}");
        }
    }

    #[test]
    fn every_field_of_kernel_toml_is_checked_before_it_reaches_qemu() {
        let data = tempfile::tempdir().unwrap();
        let dir = kernels_dir(data.path()).join("k");
        trust::ensure_dir(&dir).unwrap();
        std::fs::write(dir.join("vmlinuz"), b"bzImage").unwrap();
        let good = KernelInfo {
            name: "k".into(),
            release: "6.1.0-57-cloud-amd64".into(),
            source: "Debian package linux-image-6.1.0-57-cloud-amd64-unsigned 6.1.192-3".into(),
            version: "6.1.192".into(),
            reverted: "fsverity-2023".into(),
            switches: Vec::new(),
            profile: String::new(),
            build_key: "0123456789abcdef".into(),
        };
        let write = |info: &KernelInfo| {
            trust::write_state(
                &dir.join("kernel.toml"),
                toml::to_string(info).unwrap().as_bytes(),
            )
            .unwrap()
        };
        write(&good);
        assert_eq!(open(data.path(), "k").unwrap().info, good);
        for (key, bad) in [
            (
                "name",
                KernelInfo {
                    name: "k,file=victim".into(),
                    ..good.clone()
                },
            ),
            (
                "name",
                KernelInfo {
                    name: "j".into(),
                    ..good.clone()
                },
            ),
            (
                "release",
                KernelInfo {
                    release: "6.1,x".into(),
                    ..good.clone()
                },
            ),
            (
                "release",
                KernelInfo {
                    release: String::new(),
                    ..good.clone()
                },
            ),
            (
                "version",
                KernelInfo {
                    version: "6 1".into(),
                    ..good.clone()
                },
            ),
            (
                "source",
                KernelInfo {
                    source: "a\u{1b}]0;x\u{7}".into(),
                    ..good.clone()
                },
            ),
            (
                "source",
                KernelInfo {
                    source: "x".repeat(SOURCE_CAP + 1),
                    ..good.clone()
                },
            ),
            (
                "reverted",
                KernelInfo {
                    reverted: "../x".into(),
                    ..good.clone()
                },
            ),
            (
                "switches",
                KernelInfo {
                    switches: vec!["fsverity_unbound".into(), "../x".into()],
                    ..good.clone()
                },
            ),
            (
                "profile",
                KernelInfo {
                    profile: "server".into(),
                    ..good.clone()
                },
            ),
            (
                "build_key",
                KernelInfo {
                    build_key: "xyz".into(),
                    ..good.clone()
                },
            ),
        ] {
            write(&bad);
            let e = open(data.path(), "k").unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{e}");
            let e = e.to_string();
            assert!(
                e.contains("kernel.toml: ")
                    && e.contains(&format!("{key} = "))
                    && e.contains("allowed"),
                "{key}: {e}"
            );
        }
        write(&KernelInfo {
            name: "k,file=victim".into(),
            ..good.clone()
        });
        let e = open(data.path(), "k").unwrap_err().to_string();
        assert!(
            e.contains(r#"name = "k,file=victim": allowed the kernel's directory name ("k")"#),
            "{e}"
        );
    }

    #[test]
    fn a_kernel_is_listed_and_opened_and_a_forged_one_is_refused() {
        let data = tempfile::tempdir().unwrap();
        assert!(list(data.path()).unwrap().is_empty());
        let dir = kernels_dir(data.path()).join("k1");
        trust::ensure_dir(&dir).unwrap();
        std::fs::write(dir.join("vmlinuz"), b"bzImage").unwrap();
        let info = KernelInfo {
            name: "k1".into(),
            release: "6.1.0-1".into(),
            source: "test".into(),
            version: "6.1.1".into(),
            reverted: String::new(),
            switches: Vec::new(),
            profile: String::new(),
            build_key: String::new(),
        };
        trust::write_state(
            &dir.join("kernel.toml"),
            toml::to_string(&info).unwrap().as_bytes(),
        )
        .unwrap();
        let k = open(data.path(), "k1").unwrap();
        assert_eq!(k.info, info);
        assert_eq!(k.image(), dir.join("vmlinuz"));
        assert!(k.modules().is_none());
        // A link to another tree is not its modules'.
        let other = data.path().join("other");
        std::fs::create_dir(&other).unwrap();
        std::os::unix::fs::symlink(&other, dir.join("modules")).unwrap();
        assert!(k.modules().is_none());
        std::fs::remove_file(dir.join("modules")).unwrap();
        std::fs::create_dir(dir.join("modules")).unwrap();
        assert!(k.modules().is_some());
        std::fs::remove_dir(dir.join("modules")).unwrap();
        assert_eq!(list(data.path()).unwrap(), vec![k]);
        // A link in place of the image is refused, not followed.
        std::fs::remove_file(dir.join("vmlinuz")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", dir.join("vmlinuz")).unwrap();
        let e = open(data.path(), "k1").unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        assert!(
            open(data.path(), "nope")
                .unwrap_err()
                .to_string()
                .contains("lab fetch")
        );
    }
}
