//! `readpath kernel`: readpath held against the real kernel (root). `check`
//! writes the dataset's plaintext through the kernel's own fscrypt and
//! compares the ciphertext (and the fs-verity digest) with readpath's, bit
//! for bit; `trace` follows the kernel's post-read workqueues through their
//! tracepoints; `restore` puts back what an interrupted one left.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};

use crate::cli::KernelAction;
use crate::crypto::CipherKind;
use crate::dataset::Dataset;
use crate::invocation::BadInput;
use crate::settings::parse_size;

/// A check's outcome was a mismatch (exit status 1).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Mismatch(pub String);

/// `readpath kernel ...`: nothing under the data dir is acted on unless it
/// may be trusted.
pub(super) fn kernel(data_dir: &Path, action: KernelAction) -> Result<()> {
    crate::sys::install_stop_handlers();
    // Nothing under the data dir is acted on unless it may be trusted.
    crate::dataset::check_data_dir(data_dir).map_err(|e| BadInput(e.to_string()))?;
    match action {
        KernelAction::Restore => restore(data_dir),
        KernelAction::Switches => switches(),
        KernelAction::Trace { duration } => trace(data_dir, duration),
        KernelAction::Check { size, dir } => check(data_dir, &size, dir.as_deref()),
    }
}

/// `kernel switches`: the running kernel's lab switches and their values.
fn switches() -> Result<()> {
    use crate::kernel::switches::{DIR, SWITCHES, probe, read_under};
    if !probe() {
        return Err(BadInput(format!(
            "this kernel ({}) has no readpath lab switches ({DIR}): boot one built with `readpath lab build --switches` (e.g. readpath lab run vm:6.1-switches -- kernel switches)",
            crate::sys::machine_kernel()
        ))
        .into());
    }
    let now = read_under(Path::new("/"));
    println!("{DIR} ({})", crate::sys::machine_kernel());
    for s in SWITCHES {
        let v = now
            .iter()
            .find(|(n, _)| *n == s.name)
            .map_or("?", |(_, v)| v.as_str());
        let mark = if v == s.default { " " } else { "*" };
        println!(
            "{mark} {:<20} {:>4}  (6.1: {:>3})  {}",
            s.name, v, s.default, s.what
        );
    }
    Ok(())
}

/// `kernel restore`: what an interrupted check or trace left, put back.
fn restore(data_dir: &Path) -> Result<()> {
    let mut r = crate::kernel::restore_all(data_dir);
    // Lab guests whose readpath is gone, proven readpath's (see
    // `crate::lab::vm::orphans`); a record that proves nothing is set
    // aside and named.
    let guests = crate::lab::vm::orphans(data_dir);
    for (pid, start, image) in guests.guests {
        match crate::sys::terminate_started(pid, start) {
            Ok(()) => r.done.push(format!(
                "lab guest QEMU {pid} ({image}), left with no readpath: SIGTERM sent"
            )),
            // Ended meanwhile: nothing left to end.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => r.problems.push(format!(
                "lab guest QEMU {pid} ({image}): could not end it: {e}"
            )),
        }
    }
    for why in guests.refused {
        r.problems
            .push(format!("lab guest record refused, nothing ended: {why}"));
    }
    if r.done.is_empty() && r.problems.is_empty() {
        println!("readpath kernel restore: nothing to put back");
    }
    for d in &r.done {
        println!("readpath kernel restore: put back {d}");
    }
    for p in &r.problems {
        eprintln!(
            "readpath kernel restore: not put back: {}",
            crate::output::format::printable(p, false)
        );
    }
    if !r.problems.is_empty() {
        anyhow::bail!(
            "{} thing(s) not put back (listed above); the rest was",
            r.problems.len()
        );
    }
    Ok(())
}

/// `kernel trace`: the post-read workqueues followed for `duration` (less
/// on a stop signal), each queue's figures printed.
fn trace(data_dir: &Path, duration: Duration) -> Result<()> {
    // tracefs mounted first where it is not (unmounted at the end,
    // after the tracer's instance is gone).
    let _tracefs = crate::kernel::ensure_tracefs(data_dir)
        .map_err(|e| BadInput(format!("readpath kernel trace: {e}")))?;
    let t = crate::kernel::trace::Tracer::start(data_dir)
        .map_err(|e| BadInput(format!("readpath kernel trace: {e}")))?;
    let started = std::time::Instant::now();
    let end = started + duration;
    eprintln!(
        "readpath kernel trace: tracing the kernel's post-read workqueues for {:.1}s; Ctrl-C stops early",
        duration.as_secs_f64()
    );
    while std::time::Instant::now() < end && !crate::sys::stop_requested() {
        std::thread::sleep(Duration::from_millis(50));
    }
    // What was traced: less than asked when a stop signal ended it.
    let traced = started.elapsed().min(duration);
    let queues = t.finish();
    println!(
        "readpath kernel trace: the kernel's post-read workqueues over {:.1}s{} (workqueue tracepoints, tracefs instance of its own)",
        traced.as_secs_f64(),
        if traced < duration {
            format!(" of {:.1}s asked (stopped early)", duration.as_secs_f64())
        } else {
            String::new()
        }
    );
    if queues.is_empty() {
        println!(
            "  no item on {}: nothing read an encrypted or verity file cold meanwhile",
            crate::kernel::trace::POST_READ_QUEUES.join(", ")
        );
    }
    let mut names: Vec<_> = queues.keys().cloned().collect();
    names.sort();
    for n in names {
        let q = &queues[&n];
        let us = |h: &hdrhistogram::Histogram<u64>, p: f64| {
            crate::output::report::fio_us(h.value_at_quantile(p) as f64 / 1e3)
        };
        println!(
            "  {n}: {} items; queue (usec) p50={} p99={} max={}; exec (usec) p50={} p99={}; ran on another CPU than queued: {:.0}%",
            q.items,
            us(&q.queue_ns, 0.5),
            us(&q.queue_ns, 0.99),
            crate::output::report::fio_us(q.queue_ns.max() as f64 / 1e3),
            us(&q.exec_ns, 0.5),
            us(&q.exec_ns, 0.99),
            if q.items > 0 {
                q.moved as f64 * 100.0 / q.items as f64
            } else {
                0.0
            }
        );
    }
    Ok(())
}

/// `kernel check`: `size` bytes of the dataset's plaintext through the
/// kernel's fscrypt (each cipher) and fs-verity on a scratch image or on
/// `dir`'s filesystem; a difference is a [`Mismatch`] (exit status 1).
fn check(data_dir: &Path, size: &str, dir: Option<&Path>) -> Result<()> {
    let bytes = parse_size(size)
        .ok()
        .filter(|&n| (4096..=256 << 20).contains(&n) && n % 4096 == 0)
        .ok_or_else(|| {
            BadInput(format!(
                "--size \"{size}\": allowed a multiple of 4K from 4K to 256M"
            ))
        })?;
    let (fs, mnt, device) = checked_fs(data_dir, bytes, dir)?;
    let mut quiet = |_: u64, _: u64| {};
    let (ds, _) = Dataset::open_or_prepare(data_dir, bytes, b"", &mut quiet)?;
    let plain = std::fs::read(ds.path(crate::dataset::Variant::Plain))?;
    match &fs {
        Some(fs) => println!(
            "readpath kernel check: {} of the dataset's plaintext through the kernel's fscrypt on an ext4 image (encrypt, 4K blocks) loop-mounted at {}",
            crate::settings::format_size(bytes),
            fs.mnt.display()
        ),
        None => println!(
            "readpath kernel check: {} of the dataset's plaintext through the kernel's fscrypt in {}, the ciphertext read from {}",
            crate::settings::format_size(bytes),
            mnt.display(),
            device.display()
        ),
    }
    let mut mismatch = Vec::new();
    for kind in [CipherKind::Aes256Xts, CipherKind::Adiantum] {
        if let Some(m) = check_cipher(kind, &mnt, &device, &ds, &plain)? {
            mismatch.push(m);
        }
    }
    if let Some(m) = check_verity(&mnt, &ds, &plain)? {
        mismatch.push(m);
    }
    if let Some(fs) = fs {
        fs.remove().context("unmounting the scratch image")?;
    }
    if mismatch.is_empty() {
        Ok(())
    } else {
        Err(Mismatch(mismatch.join("; ")).into())
    }
}

/// The filesystem checked: a scratch image (made for `bytes`), or the
/// user's directory and the block device under it; (the scratch image,
/// where it is mounted, the device the ciphertext is read from).
fn checked_fs(
    data_dir: &Path,
    bytes: u64,
    dir: Option<&Path>,
) -> Result<(Option<crate::kernel::ScratchFs>, PathBuf, PathBuf)> {
    match dir {
        None => {
            let fs = crate::kernel::ScratchFs::create(data_dir, (bytes * 2).max(64 << 20))
                .map_err(|e| BadInput(format!("readpath kernel check: {e}")))?;
            let (mnt, image) = (fs.mnt.clone(), fs.image.clone());
            Ok((Some(fs), mnt, image))
        }
        Some(d) => {
            if !d.is_dir() {
                return Err(BadInput(format!(
                    "readpath kernel check: --dir {}: not a directory",
                    d.display()
                ))
                .into());
            }
            // readpath writes there as root: the data dir's trust rule.
            crate::sys::trust::check_dir(d)
                .map_err(|u| BadInput(format!("readpath kernel check: --dir: not trusted: {u}")))?;
            let dev = crate::kernel::block_device_path(d).map_err(|e| {
                BadInput(format!("readpath kernel check: --dir {}: {e}", d.display()))
            })?;
            Ok((None, d.to_path_buf(), dev))
        }
    }
}

/// One cipher's contents encryption checked and its figures printed; a
/// mismatch described (`None`: it matched, or this kernel lacks the
/// cipher).
fn check_cipher(
    kind: CipherKind,
    mnt: &Path,
    device: &Path,
    ds: &Dataset,
    plain: &[u8],
) -> Result<Option<String>> {
    let c = match crate::kernel::check_contents(mnt, device, ds.master_key(), plain, kind) {
        Ok(c) => c,
        Err(e) if crate::sys::lacks_algorithm(&e) => {
            println!(
                "  fscrypt contents, {}: not checked: this kernel lacks the cipher ({e})",
                kind.name()
            );
            return Ok(None);
        }
        Err(e) if e.kind() == std::io::ErrorKind::Unsupported => {
            return Err(BadInput(format!(
                "readpath kernel check: {}: {e} (the filesystem has no encrypt feature: tune2fs -O encrypt, or leave --dir out for a scratch image)",
                mnt.display()
            ))
            .into());
        }
        Err(e) => return Err(anyhow::anyhow!("{}: {e}", kind.name())),
    };
    let units = c.bytes / 4096;
    let verdict = if c.matched() { "MATCH" } else { "MISMATCH" };
    println!(
        "  fscrypt contents, {} (v2 policy, nonce {}, {} extent(s)): {} of {units} data units equal to readpath's; read back cold through the kernel: {}: {verdict}",
        kind.name(),
        c.nonce,
        c.extents,
        c.units_equal,
        if c.read_back { "equal" } else { "DIFFERENT" }
    );
    let alg = match kind {
        CipherKind::Adiantum => "adiantum(xchacha12,aes)",
        _ => "xts(aes)",
    };
    let driver = crate::kernel::crypto_driver(alg).map_or_else(
        || format!("{alg}: driver unknown (/proc/crypto)"),
        |(d, p)| format!("the kernel's {alg} is {d} (priority {p})"),
    );
    println!(
        "    read back cold: {} in {:.1} ms ({:.0} MiB/s); {driver}",
        crate::settings::format_size(c.bytes),
        c.read_back_s * 1e3,
        c.bytes as f64 / (1 << 20) as f64 / c.read_back_s.max(1e-9)
    );
    if c.matched() {
        return Ok(None);
    }
    Ok(Some(format!(
        "{}: first differing data unit {:?}, read back {}",
        kind.name(),
        c.first_mismatch,
        if c.read_back { "equal" } else { "different" }
    )))
}

/// The fs-verity digest the kernel measures against readpath's, printed; a
/// difference described (`None`: equal, or this kernel's ext4 has no
/// fs-verity).
fn check_verity(mnt: &Path, ds: &Dataset, plain: &[u8]) -> Result<Option<String>> {
    if !crate::kernel::ext4_has_verity() {
        println!(
            "  fs-verity digest: not checked: this kernel's ext4 has no fs-verity (/sys/fs/ext4/features/verity is missing: CONFIG_FS_VERITY is not set)"
        );
        return Ok(None);
    }
    let want = ds.tree().file_digest();
    let got = crate::kernel::measure_verity(mnt, plain, b"")
        .context("fs-verity digest through the kernel")?;
    let verdict = if got[..] == want[..] {
        "MATCH"
    } else {
        "MISMATCH"
    };
    println!(
        "  fs-verity digest (FS_IOC_MEASURE_VERITY, sha256, 4K blocks, no salt): kernel {} readpath {}: {verdict}",
        hex::encode(&got),
        hex::encode(want)
    );
    Ok((got[..] != want[..]).then(|| "fs-verity digest differs".to_string()))
}
