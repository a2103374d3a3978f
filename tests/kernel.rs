//! readpath against the real kernel: the plaintext written through the
//! kernel's own fscrypt on an ext4 image (`-O encrypt`, loop-mounted in a
//! temp dir and unmounted by a guard, panics included) must land on the
//! image as exactly the ciphertext readpath computes with the key derived
//! from the file's nonce. Needs root, a loop device and mkfs.ext4; skips,
//! saying which is missing, elsewhere.

#[path = "common/skip.rs"]
mod skip;

use std::path::{Path, PathBuf};
use std::process::Command;

use readpath::crypto::CipherKind;
use readpath::kernel::{check_contents, fscrypt};

#[path = "common/kernel.rs"]
mod probe;
use probe::missing;

/// An ext4 image with `encrypt`, loop-mounted; unmounted when dropped.
struct Mounted {
    _dir: tempfile::TempDir,
    image: PathBuf,
    mnt: PathBuf,
}

impl Mounted {
    fn new() -> Result<Mounted, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let image = dir.path().join("fs.img");
        let mnt = dir.path().join("mnt");
        std::fs::create_dir(&mnt).map_err(|e| e.to_string())?;
        let f = std::fs::File::create(&image).map_err(|e| e.to_string())?;
        f.set_len(64 << 20).map_err(|e| e.to_string())?;
        drop(f);
        let run = |cmd: &mut Command| -> Result<(), String> {
            let o = cmd.output().map_err(|e| e.to_string())?;
            if o.status.success() {
                Ok(())
            } else {
                Err(format!("{cmd:?}: {}", String::from_utf8_lossy(&o.stderr)))
            }
        };
        run(Command::new("mkfs.ext4")
            .args(["-q", "-F", "-b", "4096", "-O", "encrypt"])
            .arg(&image))?;
        // `-o loop` attaches with autoclear: unmounting detaches it.
        run(Command::new("mount")
            .args(["-o", "loop"])
            .arg(&image)
            .arg(&mnt))?;
        Ok(Mounted {
            _dir: dir,
            image,
            mnt,
        })
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.mnt).status();
    }
}

fn plaintext(bytes: usize) -> Vec<u8> {
    let mut p = vec![0u8; bytes];
    readpath::dataset::fill_plaintext(readpath::dataset::DEFAULT_SEED, 0, &mut p);
    p
}

#[test]
fn the_kernels_fscrypt_ciphertext_is_readpaths_bit_for_bit() {
    if let Some(why) = missing() {
        skip::skip(
            "the_kernels_fscrypt_ciphertext_is_readpaths_bit_for_bit",
            &format!("needs {why}"),
            skip::root(),
        );
        return;
    }
    let m = match Mounted::new() {
        Ok(m) => m,
        Err(e) => {
            skip::skip(
                "the_kernels_fscrypt_ciphertext_is_readpaths_bit_for_bit",
                &e.to_string(),
                true,
            );
            return;
        }
    };
    let key: Vec<u8> = (0..64u8).map(|i| i.wrapping_mul(37) ^ 0x5a).collect();
    let plain = plaintext(1 << 20);
    for kind in [CipherKind::Aes256Xts, CipherKind::Adiantum] {
        match check_contents(&m.mnt, &m.image, &key, &plain, kind) {
            Ok(c) => {
                assert_eq!(c.block_size, 4096);
                assert!(c.extents >= 1, "{c:?}");
                assert!(
                    c.matched(),
                    "{kind:?}: the kernel's ciphertext differs: {c:?}"
                );
                assert_eq!(c.units_equal, 256, "{kind:?}");
            }
            // A kernel built without Adiantum refuses the file.
            Err(e) if kind == CipherKind::Adiantum => {
                eprintln!("SKIP the Adiantum part: {e}");
            }
            Err(e) => panic!("{kind:?}: {e}"),
        }
    }
    // Nothing is left behind in the filesystem.
    let left: Vec<_> = std::fs::read_dir(&m.mnt)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n != "lost+found")
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn a_file_on_the_image_reports_encrypted_extents() {
    if let Some(why) = missing() {
        skip::skip(
            "a_file_on_the_image_reports_encrypted_extents",
            &format!("needs {why}"),
            skip::root(),
        );
        return;
    }
    let Ok(m) = Mounted::new() else {
        skip::skip(
            "a_file_on_the_image_reports_encrypted_extents",
            "no mount",
            true,
        );
        return;
    };
    let key = [7u8; 64];
    let root = std::fs::File::open(&m.mnt).unwrap();
    let id = fscrypt::add_key(&root, &key).unwrap();
    let dir = m.mnt.join("enc");
    std::fs::create_dir(&dir).unwrap();
    fscrypt::set_policy(
        &std::fs::File::open(&dir).unwrap(),
        &fscrypt::PolicyV2::new(fscrypt::MODE_AES_256_XTS, id),
    )
    .unwrap();
    let p = dir.join("f");
    std::fs::write(&p, plaintext(64 << 10)).unwrap();
    let f = std::fs::File::open(&p).unwrap();
    let ex = fscrypt::extents(&f).unwrap();
    assert!(!ex.is_empty());
    // Written and synced: no extent is unwritten (ext4 does not report
    // FIEMAP_EXTENT_DATA_ENCRYPTED), and they cover the 64 KiB.
    assert!(
        ex.iter().all(|e| e.flags & fscrypt::EXTENT_UNWRITTEN == 0),
        "{ex:?}"
    );
    assert!(
        ex.iter().map(|e| e.length).sum::<u64>() >= 64 << 10,
        "{ex:?}"
    );
    assert_eq!(
        ex.last().unwrap().flags & fscrypt::EXTENT_LAST,
        fscrypt::EXTENT_LAST
    );
    // Two files in one directory get different nonces.
    std::fs::write(dir.join("g"), b"x").unwrap();
    let n1 = fscrypt::nonce(&f).unwrap();
    let n2 = fscrypt::nonce(&std::fs::File::open(dir.join("g")).unwrap()).unwrap();
    assert_ne!(n1, n2);
    // An unencrypted file has no nonce.
    std::fs::write(m.mnt.join("plain"), b"x").unwrap();
    assert!(fscrypt::nonce(&std::fs::File::open(m.mnt.join("plain")).unwrap()).is_err());
    drop(f);
    fscrypt::remove_key(&root, id).unwrap();
}

#[test]
fn a_check_left_mounted_by_a_crash_is_put_back_by_restore() {
    if let Some(why) = missing() {
        skip::skip(
            "a_check_left_mounted_by_a_crash_is_put_back_by_restore",
            &format!("needs {why}"),
            skip::root(),
        );
        return;
    }
    let data = tempfile::tempdir().unwrap();
    let fs = match readpath::kernel::ScratchFs::create(data.path(), 64 << 20) {
        Ok(fs) => fs,
        Err(e) => {
            skip::skip(
                "a_check_left_mounted_by_a_crash_is_put_back_by_restore",
                &e.to_string(),
                true,
            );
            return;
        }
    };
    let mnt = fs.mnt.clone();
    // Whatever happens below, the mount goes when the test ends.
    struct Undo<'a>(&'a Path);
    impl Drop for Undo<'_> {
        fn drop(&mut self) {
            let _ = readpath::kernel::restore(self.0);
        }
    }
    let _undo = Undo(data.path());
    assert!(readpath::kernel::is_mount_point(&mnt));
    // A crash: nothing runs the guard, and the lock goes with the process.
    let state = data.path().join("kernel/state.json");
    assert!(state.exists(), "the mount is recorded before it is made");
    fs.crash();
    // Another test of this binary spawning a process holds a copy of every
    // descriptor, the dropped lock's too, between its fork and its exec:
    // restore then (rightly) sees the lock held and leaves the mount. A
    // crashed process's lock is free for good, so a retry gets it.
    let mut done = Vec::new();
    for _ in 0..100 {
        done = readpath::kernel::restore(data.path()).unwrap();
        if !done.is_empty() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(done, vec![mnt.clone()]);
    assert!(!readpath::kernel::is_mount_point(&mnt));
    assert!(!state.exists());
    assert!(!data.path().join("kernel/fs.img").exists());
    // Nothing more to do the second time.
    assert!(readpath::kernel::restore(data.path()).unwrap().is_empty());
}

#[test]
fn kernel_check_on_the_command_line_matches_or_says_why_not() {
    let data = tempfile::tempdir().unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_readpath"))
        .args(["kernel", "check", "--size", "1M", "--data-dir"])
        .arg(data.path())
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    if let Some(why) = missing() {
        assert_eq!(o.status.code(), Some(2), "{out}{err}");
        skip::skip(
            "kernel_check_on_the_command_line_matches_or_says_why_not",
            &format!("needs {why}"),
            skip::root(),
        );
        return;
    }
    assert_eq!(o.status.code(), Some(0), "{out}{err}");
    assert!(
        out.contains("aes-256-xts")
            && out.contains("256 of 256 data units")
            && out.contains("MATCH"),
        "{out}"
    );
    assert!(out.contains("fs-verity digest"), "{out}");
    assert!(!data.path().join("kernel/state.json").exists());
    assert!(!readpath::kernel::is_mount_point(
        &data.path().join("kernel/mnt")
    ));
    // Bad input: exit 2 naming the flag.
    let o = Command::new(env!("CARGO_BIN_EXE_readpath"))
        .args(["kernel", "check", "--size", "1G", "--data-dir"])
        .arg(data.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--size \"1G\""));
}

/// Why the kernel's workqueue tracepoints cannot be followed here.
/// Unmounts tracefs at exit, where this test binary mounted it.
extern "C" fn unmount_tracefs() {
    let _ = Command::new("umount").arg("/sys/kernel/tracing").status();
}

fn no_tracing() -> Option<String> {
    if let Some(why) = missing() {
        return Some(why);
    }
    // tracefs mounted once for this binary where it is not (as readpath
    // does), and unmounted when the binary exits.
    static MOUNTED: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    MOUNTED.get_or_init(|| {
        let events = Path::new("/sys/kernel/tracing/events");
        if !events.exists()
            && Command::new("mount")
                .args(["-t", "tracefs", "nodev", "/sys/kernel/tracing"])
                .status()
                .is_ok_and(|s| s.success())
        {
            // SAFETY: registers a plain extern "C" fn with no arguments.
            unsafe { libc::atexit(unmount_tracefs) };
        }
    });
    if !Path::new("/sys/kernel/tracing/events/workqueue/workqueue_queue_work").exists() {
        return Some(
            "tracefs with workqueue events (mount -t tracefs nodev /sys/kernel/tracing)".into(),
        );
    }
    None
}

#[test]
fn the_kernels_fscrypt_queue_is_seen_through_its_tracepoints() {
    if let Some(why) = no_tracing() {
        skip::skip(
            "the_kernels_fscrypt_queue_is_seen_through_its_tracepoints",
            &format!("needs {why}"),
            skip::root(),
        );
        return;
    }
    let data = tempfile::tempdir().unwrap();
    let fs = readpath::kernel::ScratchFs::create(data.path(), 64 << 20).unwrap();
    let t = readpath::kernel::trace::Tracer::start(data.path()).unwrap();
    let inst = format!(
        "/sys/kernel/tracing/instances/readpath-{}",
        std::process::id()
    );
    assert!(Path::new(&inst).exists());
    // The check reads its file back cold: each readahead bio is decrypted
    // by a work item on the kernel's fscrypt_read_queue.
    let key = [3u8; 64];
    let c = check_contents(
        &fs.mnt,
        &fs.image,
        &key,
        &plaintext(4 << 20),
        CipherKind::Aes256Xts,
    )
    .unwrap();
    assert!(c.matched(), "{c:?}");
    std::thread::sleep(std::time::Duration::from_millis(200));
    let queues = t.finish();
    let q = queues
        .get("fscrypt_read_queue")
        .unwrap_or_else(|| panic!("no fscrypt_read_queue item: {:?}", queues.keys()));
    assert!(q.items > 0);
    assert_eq!(q.queue_ns.len(), q.exec_ns.len());
    assert!(q.exec_ns.len() >= q.items);
    // Only the post-read queues are followed, and the instance is gone.
    assert!(
        queues
            .keys()
            .all(|k| readpath::kernel::trace::POST_READ_QUEUES.contains(&k.as_str()))
    );
    assert!(!Path::new(&inst).exists());
    assert!(
        !data
            .path()
            .join(format!("kernel/trace-{}.state", std::process::id()))
            .exists()
    );
    fs.remove().unwrap();
}

#[test]
fn a_trace_killed_by_sigkill_is_put_back_by_restore() {
    if let Some(why) = no_tracing() {
        skip::skip(
            "a_trace_killed_by_sigkill_is_put_back_by_restore",
            &format!("needs {why}"),
            skip::root(),
        );
        return;
    }
    let data = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_readpath"))
        .args(["kernel", "trace", "--duration", "60s", "--data-dir"])
        .arg(data.path())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let inst = PathBuf::from(format!(
        "/sys/kernel/tracing/instances/readpath-{}",
        child.id()
    ));
    let t0 = std::time::Instant::now();
    while !inst.join("trace_pipe").exists() && t0.elapsed().as_secs() < 20 {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(inst.exists(), "the trace started");
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(inst.exists(), "a SIGKILL leaves the instance");
    let o = Command::new(env!("CARGO_BIN_EXE_readpath"))
        .args(["kernel", "restore", "--data-dir"])
        .arg(data.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains(&*inst.to_string_lossy()));
    assert!(!inst.exists(), "restore removed it");
}

#[test]
fn an_interval_of_the_tracer_sees_the_loop_devices_reads_and_the_kworkers() {
    let name = "an_interval_of_the_tracer_sees_the_loop_devices_reads_and_the_kworkers";
    if let Some(why) = no_tracing() {
        skip::skip(name, &format!("needs {why}"), skip::root());
        return;
    }
    if !Path::new("/sys/kernel/tracing/events/block/block_rq_issue").exists() {
        skip::skip(
            name,
            "needs the block tracepoints (CONFIG_BLK_DEV_IO_TRACE)",
            false,
        );
        return;
    }
    // The instance is named by the PID and the test above holds one in
    // this process meanwhile: this one traces in a process of its own.
    const CHILD: &str = "READPATH_TEST_TRACER_CHILD";
    if std::env::var_os(CHILD).is_none() {
        let o = Command::new(std::env::current_exe().unwrap())
            .args([name, "--exact", "--nocapture", "--test-threads=1"])
            .env(CHILD, "1")
            .output()
            .unwrap();
        let out = String::from_utf8_lossy(&o.stdout);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{out}{err}");
        assert!(out.contains("1 passed"), "{out}{err}");
        eprint!("{err}");
        return;
    }
    let data = tempfile::tempdir().unwrap();
    let fs = readpath::kernel::ScratchFs::create(data.path(), 64 << 20).unwrap();
    // The loop device the image is mounted on.
    let dev = std::os::unix::fs::MetadataExt::dev(&std::fs::metadata(&fs.mnt).unwrap());
    let device = (libc::major(dev), libc::minor(dev));
    let t = readpath::kernel::trace::Tracer::start_with(data.path(), Some(device)).unwrap();
    // Written, then read back cold (posix_fadvise DONTNEED): each bio is
    // read from the loop device and decrypted on fscrypt_read_queue.
    let c = check_contents(
        &fs.mnt,
        &fs.image,
        &[5u8; 64],
        &plaintext(4 << 20),
        CipherKind::Aes256Xts,
    )
    .unwrap();
    assert!(c.matched(), "{c:?}");
    // The interval up to now, once the reader has read that far (the
    // trace's clock is CLOCK_MONOTONIC, as the metrics' now_ns).
    let one = t.take_interval_at(
        readpath::metrics::now_ns(),
        std::time::Duration::from_secs(10),
    );
    assert!(one.requests > 0, "no read request on {device:?}");
    assert_eq!(one.requests, one.device_ns.len());
    assert!(one.device_ns.min() > 0);
    let q = one
        .queues
        .get("fscrypt_read_queue")
        .unwrap_or_else(|| panic!("no fscrypt_read_queue item: {:?}", one.queues.keys()));
    assert!(q.items > 0);
    assert_eq!(q.queue_ns.len(), q.items);
    assert!(!one.kworkers.is_empty());
    // Every item that ended was started in the interval, by a kworker.
    assert!(one.kworkers.values().sum::<u64>() >= q.items, "{one:?}");
    eprintln!(
        "{name}: {} reads on {device:?}, p50 {} us; {} items on fscrypt_read_queue, queue p50 {} us, exec p50 {} us; kworkers {:?}; lost {}",
        one.requests,
        one.device_ns.value_at_quantile(0.5) / 1000,
        q.items,
        q.queue_ns.value_at_quantile(0.5) / 1000,
        q.exec_ns.value_at_quantile(0.5) / 1000,
        one.kworkers,
        one.lost
    );
    // The next interval starts empty, and the totals hold both, and
    // what the reader read only as it stopped: an item whose kworker ran
    // after the last page was unlocked (late, on a loaded machine) ends
    // after both intervals were taken.
    let two = t.take_interval();
    let later = two.queues.get("fscrypt_read_queue").map_or(0, |q| q.items);
    let total = t.finish();
    let all = total["fscrypt_read_queue"].items;
    assert!(all >= q.items + later, "{all} < {} + {later}", q.items);
    fs.remove().unwrap();
}

/// The kernel's fs-verity digest of the dataset's plaintext
/// (`FS_IOC_MEASURE_VERITY`) equals readpath's, with and without a salt.
/// Needs an ext4 with `verity` (`CONFIG_FS_VERITY`); skips, saying so,
/// where the kernel lacks it (this machine).
#[test]
fn the_kernels_fs_verity_digest_is_readpaths() {
    let name = "the_kernels_fs_verity_digest_is_readpaths";
    if let Some(why) = missing() {
        println!("{name}: skipped: needs {why}");
        return;
    }
    if !readpath::kernel::ext4_has_verity() {
        println!(
            "{name}: skipped: this kernel's ext4 has no fs-verity (/sys/fs/ext4/features/verity is missing: CONFIG_FS_VERITY is not set)"
        );
        return;
    }
    let data = tempfile::tempdir().unwrap();
    let fs = readpath::kernel::ScratchFs::create(data.path(), 64 << 20).unwrap();
    let plain = plaintext(1 << 20);
    for salt in [&b""[..], &b"\x01\x02\x03\x04"[..]] {
        let params = readpath::verity::merkle::MerkleParams::new(4096, salt).unwrap();
        let want = readpath::verity::merkle::digest_reader(&plain[..], &params).unwrap();
        let got = readpath::kernel::measure_verity(&fs.mnt, &plain, salt).unwrap();
        assert_eq!(got, want.to_vec(), "salt {salt:?}");
    }
    fs.remove().unwrap();
}

/// `kernel check --dir` on a filesystem readpath did not make: the
/// ciphertext is read from the block device under it (here a loop device
/// the test attached), and matches.
#[test]
fn kernel_check_dir_reads_the_ciphertext_from_the_block_device() {
    let name = "kernel_check_dir_reads_the_ciphertext_from_the_block_device";
    if let Some(why) = missing() {
        println!("{name}: skipped: needs {why}");
        return;
    }
    let m = Mounted::new().unwrap();
    let data = tempfile::tempdir().unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_readpath"))
        .arg("--data-dir")
        .arg(data.path())
        .args(["kernel", "check", "--size", "1M", "--dir"])
        .arg(&m.mnt)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.contains("the ciphertext read from /dev/loop"), "{out}");
    assert!(
        out.contains("256 of 256 data units equal to readpath's"),
        "{out}"
    );
    assert!(out.contains("MATCH"), "{out}");
    // Nothing of the check is left on the filesystem.
    let left: Vec<_> = std::fs::read_dir(&m.mnt)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| n != "lost+found")
        .collect();
    assert!(left.is_empty(), "{left:?}");
}
