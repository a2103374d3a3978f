//! Tests of the parsers (fixed samples) and of the live probes.

use super::*;
use std::io::Write;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

fn spin_for(d: Duration) {
    let end = Instant::now() + d;
    let mut x = 0u64;
    while Instant::now() < end {
        x = std::hint::black_box(x.wrapping_add(1));
    }
}

/// The calling thread's CPU time by its own clock.
fn thread_cputime_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Spins until the calling thread has used `ns` of CPU, however long that
/// takes on a busy machine.
fn burn_cpu_ns(ns: u64) {
    let start = thread_cputime_ns();
    while thread_cputime_ns() - start < ns {
        spin_for(Duration::from_micros(200));
    }
}

// ---- pure parsers ---------------------------------------------------

#[test]
fn parses_schedstat_sample() {
    assert_eq!(
        parse_schedstat("18303990 9254706 26\n"),
        Some([18_303_990, 9_254_706, 26])
    );
    assert_eq!(parse_schedstat("0 0 0"), Some([0, 0, 0]));
    assert_eq!(parse_schedstat("1 2\n"), None);
    assert_eq!(parse_schedstat("x 2 3\n"), None);
}

const STATUS_SAMPLE: &str = "Name:\tbash\nUmask:\t0022\nState:\tS (sleeping)\n\
    Tgid:\t2569\nPid:\t2569\nCapInh:\t0000000000000000\nCapPrm:\t000001fffeffffff\n\
    CapEff:\t000001fffeffffff\nCapBnd:\t000001fffeffffff\nCpus_allowed_list:\t0-1\n\
    voluntary_ctxt_switches:\t20\nnonvoluntary_ctxt_switches:\t6\n";

#[test]
fn parses_status_sample() {
    assert_eq!(parse_status_switches(STATUS_SAMPLE), Some((20, 6)));
    assert_eq!(parse_status_switches("Name:\tx\n"), None);
    assert_eq!(parse_cap_eff(STATUS_SAMPLE), Some(0x0000_01ff_feff_ffff));
    let caps = parse_cap_eff(STATUS_SAMPLE).unwrap();
    assert_ne!(caps & (1 << CAP_SYS_NICE_BIT), 0);
    assert_eq!(parse_cap_eff("CapEff:\t0000000000000000\n"), Some(0));
}

const SCHED_SAMPLE: &str = "bash (2569, #threads: 1)\n\
    -------------------------------------------------------------------\n\
    se.exec_start                                :       4471437.603865\n\
    se.vruntime                                  :           126.787688\n\
    se.sum_exec_runtime                          :            18.303990\n\
    se.nr_migrations                             :                    6\n\
    nr_switches                                  :                   26\n\
    nr_voluntary_switches                        :                   20\n\
    nr_involuntary_switches                      :                    6\n\
    policy                                       :                    0\n\
    prio                                         :                  120\n\
    current_node=0, numa_group_id=0\n";

#[test]
fn parses_sched_sample() {
    assert_eq!(
        parse_sched(SCHED_SAMPLE),
        SchedFields {
            migrations: Some(6),
            switches: Some((20, 6)),
        }
    );
    // The same counters as status shows.
    assert_eq!(
        parse_sched(SCHED_SAMPLE).switches,
        parse_status_switches(STATUS_SAMPLE)
    );
    assert_eq!(
        parse_sched("x (1, #threads: 1)\nse.vruntime : 1.0\n"),
        SchedFields::default()
    );
    assert_eq!(
        parse_sched("se.nr_migrations : 3\nnr_voluntary_switches : 2\n"),
        SchedFields {
            migrations: Some(3),
            switches: None,
        }
    );
}

const PROC_STAT_SAMPLE: &str = "cpu  3560 0 2796 886372 512 0 272 1279 0 0\n\
    cpu0 1145 0 985 444448 35 0 98 613 0 0\n\
    cpu1 2414 7 1810 441924 477 3 173 666 0 0\n\
    cpu3 1 2 3 4\n\
    intr 215579 0 0 0 0\n\
    ctxt 4242\n";

#[test]
fn parses_proc_stat_sample() {
    let mut out = vec![CpuTimes::default(); 7]; // cleared by the parser
    assert!(parse_proc_stat(PROC_STAT_SAMPLE, &mut out).unwrap());
    assert_eq!(
        out,
        vec![
            CpuTimes {
                cpu: 0,
                user: 1145,
                nice: 0,
                system: 985,
                idle: 444_448,
                iowait: 35,
                irq: 0,
                softirq: 98,
                steal: 613,
            },
            CpuTimes {
                cpu: 1,
                user: 2414,
                nice: 7,
                system: 1810,
                idle: 441_924,
                iowait: 477,
                irq: 3,
                softirq: 173,
                steal: 666,
            },
            CpuTimes {
                cpu: 3,
                user: 1,
                nice: 2,
                system: 3,
                idle: 4,
                ..CpuTimes::default()
            },
        ]
    );
    // Only CPU lines so far: parsed, but not known to be complete.
    assert!(!parse_proc_stat("cpu  1 2 3 4\ncpu0 1 2 3 4\n", &mut out).unwrap());
    assert_eq!(out.len(), 1);
    assert!(parse_proc_stat("cpu0 1 2\nintr 0\n", &mut out).is_err());
    assert!(parse_proc_stat("cpuX 1 2 3 4\nintr 0\n", &mut out).is_err());
}

#[test]
fn cpu_usage_from_fixed_samples() {
    let t = |cpu, user, system, idle, iowait, softirq, steal| CpuTimes {
        cpu,
        user,
        nice: 0,
        system,
        idle,
        iowait,
        irq: 0,
        softirq,
        steal,
    };
    let prev = vec![t(0, 100, 50, 1000, 10, 5, 0), t(1, 10, 10, 10, 10, 0, 0)];
    let now = vec![
        // +30 user +10 system +50 idle +10 iowait: 100 ticks.
        t(0, 130, 60, 1050, 20, 5, 0),
        // +1 user +1 system +2 idle +0 iowait, +4 steal: 8 ticks.
        t(1, 11, 11, 12, 10, 0, 4),
        // Not in prev: left out.
        t(2, 1, 1, 1, 1, 0, 0),
    ];
    let mut out = Vec::new();
    cpu_usage(&prev, &now, &mut out);
    assert_eq!(
        out,
        vec![
            CpuUsage {
                cpu: 0,
                busy_pct: 40.0,
                iowait_pct: 10.0
            },
            CpuUsage {
                cpu: 1,
                busy_pct: 75.0,
                iowait_pct: 0.0
            },
        ]
    );
    let json = serde_json::to_string(&out).unwrap();
    assert_eq!(serde_json::from_str::<Vec<CpuUsage>>(&json).unwrap(), out);
    // No ticks, and iowait going backwards (NO_HZ), read as 0.
    let later = vec![t(0, 130, 60, 1050, 15, 5, 0)];
    cpu_usage(&now, &later, &mut out);
    assert_eq!(
        out,
        vec![CpuUsage {
            cpu: 0,
            busy_pct: 0.0,
            iowait_pct: 0.0
        }]
    );
    // Misaligned lists (a CPU went offline) still match by index.
    cpu_usage(&prev[1..], &now, &mut out);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].cpu, 1);
    assert_eq!(out[0].busy_pct, 75.0);
}

#[test]
fn counters_delta_and_add() {
    let a = ThreadCounters {
        cpu_ns: 10,
        run_delay_ns: 5,
        timeslices: 3,
        voluntary_ctxt_switches: 2,
        nonvoluntary_ctxt_switches: 1,
        migrations: 7,
        iowait_ns: Some(1_000),
    };
    let b = ThreadCounters {
        cpu_ns: 25,
        run_delay_ns: 5,
        timeslices: 4,
        voluntary_ctxt_switches: 9,
        nonvoluntary_ctxt_switches: 0,
        migrations: 8,
        iowait_ns: Some(4_000),
    };
    let d = b.delta(&a);
    assert_eq!(
        d,
        ThreadCounters {
            cpu_ns: 15,
            run_delay_ns: 0,
            timeslices: 1,
            voluntary_ctxt_switches: 7,
            nonvoluntary_ctxt_switches: 0, // saturated
            migrations: 1,
            iowait_ns: Some(3_000),
        }
    );
    // Not counted now (accounting off): no figure.
    let off = ThreadCounters {
        iowait_ns: None,
        ..b
    };
    assert_eq!(off.delta(&a).iowait_ns, None);
    let json = serde_json::to_string(&d).unwrap();
    assert_eq!(serde_json::from_str::<ThreadCounters>(&json).unwrap(), d);
    let mut sum = a;
    sum.add(&d);
    assert_eq!(sum.cpu_ns, 25);
    assert_eq!(sum.migrations, 8);
    assert_eq!(sum.iowait_ns, Some(4_000));
    assert_eq!(sum.nonvoluntary_ctxt_switches, 1);
}

#[test]
fn cpu_mask_round_trip() {
    let cpus = vec![0, 1, 63, 64, 65, 1500];
    assert_eq!(mask_to_cpus(&cpus_to_mask(&cpus)), cpus);
    assert_eq!(cpus_to_mask(&[0]).len() * MASK_WORD_BITS, 1024);
}

#[test]
fn fs_magic_names() {
    assert_eq!(fs_magic_name(0xEF53), Some("ext4"));
    assert_eq!(fs_magic_name(0x0102_1994), Some("tmpfs"));
    assert_eq!(fs_magic_name(0x9123_683E), Some("btrfs"));
    assert_eq!(fs_magic_name(0x1234_5678), None);
}

// ---- priority -------------------------------------------------------

#[test]
fn nice_denied_message_names_what_is_missing() {
    let reason = nice_denied_reason(-20, Some(false), Some(0));
    assert!(
        reason.starts_with("needs CAP_SYS_NICE or RLIMIT_NICE >= 40 (current soft limit 0)"),
        "{reason}"
    );
    let err = NiceError::Denied {
        wanted: -20,
        reason,
    };
    let msg = err.to_string();
    assert!(msg.contains("CAP_SYS_NICE"), "{msg}");
    assert!(msg.contains("RLIMIT_NICE"), "{msg}");
    assert!(msg.contains("nice -20"), "{msg}");
    let reason = nice_denied_reason(-5, Some(true), Some(RLIM_INFINITY_U64));
    assert!(reason.contains("RLIMIT_NICE >= 25 (current soft limit unlimited)"));
    assert!(reason.contains("user namespace"));
}

#[test]
fn nice_permission_rules() {
    // Raising nice (lowering priority) is always allowed.
    assert!(nice_permitted(5, 0, false, Some(0)));
    assert!(nice_permitted(0, 0, false, None));
    // Lowering needs the capability or 20 - nice <= RLIMIT_NICE.
    assert!(!nice_permitted(-1, 0, false, Some(20)));
    assert!(nice_permitted(-1, 0, false, Some(21)));
    assert!(nice_permitted(-20, 0, false, Some(40)));
    assert!(!nice_permitted(-20, 0, false, Some(39)));
    assert!(nice_permitted(-20, 0, true, Some(0)));
    assert_eq!(rlimit_needed_for(-20), 40);
    assert_eq!(rlimit_needed_for(-100), 40);
    assert_eq!(rlimit_needed_for(19), 1);
}

#[test]
fn set_nice_minus_20_as_root() {
    // On a scratch thread, so the test harness thread is left alone.
    std::thread::spawn(|| {
        let probe = can_raise_priority(-20);
        match set_current_thread_nice(-20) {
            Ok(()) => {
                assert!(probe.is_ok(), "probe said no but it worked: {probe:?}");
                assert_eq!(current_thread_nice().unwrap(), -20);
                // Raising nice back is always allowed.
                set_current_thread_nice(0).unwrap();
                assert_eq!(current_thread_nice().unwrap(), 0);
            }
            Err(NiceError::Denied { wanted, reason }) => {
                assert!(!real_root(), "denied as root: {reason}");
                assert_eq!(wanted, -20);
                assert!(probe.is_err());
                eprintln!("skip: not privileged: {reason}");
            }
            Err(e) => panic!("{e}"),
        }
    })
    .join()
    .unwrap();
}

/// Root of the initial user namespace (not root of a container's user
/// namespace, whose capabilities do not satisfy setpriority).
fn real_root() -> bool {
    // SAFETY: geteuid cannot fail.
    let euid = unsafe { libc::geteuid() };
    let uid_map = std::fs::read_to_string("/proc/self/uid_map").unwrap_or_default();
    let identity = uid_map.split_ascii_whitespace().collect::<Vec<_>>() == ["0", "0", "4294967295"];
    euid == 0 && identity
}

const CHILD_ENV: &str = "RP_SYS_UNPRIVILEGED_CHILD";

/// Runs as `nobody` when started by `unprivileged_paths_via_setpriv`;
/// otherwise does nothing.
#[test]
fn unprivileged_child_checks() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    // SAFETY: geteuid cannot fail.
    assert_ne!(unsafe { libc::geteuid() }, 0);
    std::thread::spawn(|| {
        let probe = can_raise_priority(-20).unwrap_err().to_string();
        assert!(probe.contains("CAP_SYS_NICE") && probe.contains("RLIMIT_NICE"));
        match set_current_thread_nice(-20) {
            Err(e @ NiceError::Denied { .. }) => {
                let msg = e.to_string();
                println!("denied as expected: {msg}");
                assert!(msg.contains("CAP_SYS_NICE"), "{msg}");
                assert!(msg.contains("RLIMIT_NICE >= 40"), "{msg}");
            }
            other => panic!("expected Denied, got {other:?}"),
        }
        // Raising nice needs no privilege, and neither does going back down
        // to where we started... only if the limit allows: it does not.
        // (From the nice the tests were started at: `nice cargo test`.)
        let start = current_thread_nice().unwrap();
        if start <= 14 {
            set_current_thread_nice(start + 5).unwrap();
            assert!(can_raise_priority(start + 5).is_ok());
            assert!(matches!(
                set_current_thread_nice(start),
                Err(NiceError::Denied { .. })
            ));
        }
    })
    .join()
    .unwrap();
    // The other probes work unprivileged too.
    let mut r = ThreadStatReader::open(gettid()).unwrap();
    let c = r.read().unwrap();
    assert!(c.cpu_ns > 0);
    let f = probe_features();
    println!("features as nobody: {f:?}");
    assert!(!f.highpri);
    if io_uring_disabled_sysctl().unwrap_or(0) == 0 {
        assert!(f.io_uring, "{:?}", f.io_uring_reason);
    }
    let mut cpus = Vec::new();
    ProcStatReader::open().unwrap().read(&mut cpus).unwrap();
    assert!(!cpus.is_empty());
    println!("unprivileged child checks passed");
}

#[test]
fn unprivileged_paths_via_setpriv() {
    if !real_root() || std::env::var_os(CHILD_ENV).is_some() {
        eprintln!("skip: needs root to drop to nobody");
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let name = module_path!()
        .split_once("::")
        .map_or(module_path!(), |(_, rest)| rest)
        .to_string()
        + "::unprivileged_child_checks";
    let out = std::process::Command::new("setpriv")
        .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"])
        .arg(&exe)
        .args([name.as_str(), "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, "1")
        .output();
    let out = match out {
        Ok(o) => o,
        Err(e) => {
            eprintln!("skip: cannot run setpriv: {e}");
            return;
        }
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if matches!(out.status.code(), Some(126) | Some(127)) || stderr.contains("Permission denied") {
        eprintln!("skip: nobody cannot execute {}: {stderr}", exe.display());
        return;
    }
    assert!(out.status.success(), "child failed:\n{stdout}\n{stderr}");
    assert!(
        stdout.contains("unprivileged child checks passed"),
        "child did not run the checks:\n{stdout}\n{stderr}"
    );
    eprintln!("{stdout}");
}

// ---- live readers ---------------------------------------------------

#[test]
fn gettid_names_a_task_of_this_process() {
    let tid = gettid();
    assert!(tid > 0);
    assert!(Path::new(&format!("/proc/self/task/{tid}")).exists());
    let other = std::thread::spawn(gettid).join().unwrap();
    assert_ne!(other, tid);
}

#[test]
fn thread_reader_sees_cpu_time_grow() {
    let mut r = ThreadStatReader::open(gettid()).unwrap();
    assert_eq!(r.tid(), gettid());
    let a = r.read().unwrap();
    // Spin until the thread has used 5 ms of CPU by its own clock (however
    // long that takes on a busy machine), then sleep once.
    let start = thread_cputime_ns();
    while thread_cputime_ns() - start < 5_000_000 {
        spin_for(Duration::from_millis(1));
    }
    std::thread::sleep(Duration::from_millis(1));
    let b = r.read().unwrap();
    let clock = thread_cputime_ns();
    let d = b.delta(&a);
    assert!(d.cpu_ns > 0, "{d:?}");
    // Same source (sum_exec_runtime); schedstat lags the clock, which
    // also folds in the time of the running slice.
    assert!(b.cpu_ns <= clock, "{b:?} vs clock {clock}");
    assert!(b.cpu_ns >= start, "{b:?} vs start {start}");
    assert!(d.timeslices >= 1, "{d:?}");
    assert!(d.voluntary_ctxt_switches >= 1, "{d:?}");
    assert!(schedstat_available());
}

#[test]
fn sched_and_status_agree_on_switches_of_a_parked_thread() {
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let (tid_tx, tid_rx) = std::sync::mpsc::channel();
    let h = std::thread::spawn(move || {
        tid_tx.send(gettid()).unwrap();
        rx.recv().unwrap();
    });
    let tid = tid_rx.recv().unwrap();
    // Let it block in recv.
    std::thread::sleep(Duration::from_millis(20));
    let mut r = ThreadStatReader::open(tid).unwrap();
    let c = r.read().unwrap();
    let n = r.status.read_whole().unwrap();
    let status = parse_status_switches(std::str::from_utf8(&r.status.buf[..n]).unwrap());
    if r.switches_from_sched {
        assert_eq!(
            status,
            Some((c.voluntary_ctxt_switches, c.nonvoluntary_ctxt_switches))
        );
    }
    assert!(c.voluntary_ctxt_switches >= 1, "{c:?}");
    tx.send(()).unwrap();
    h.join().unwrap();
}

#[test]
fn thread_reader_without_sched_file() {
    // As on kernels without CONFIG_SCHED_DEBUG.
    let mut r = ThreadStatReader::open(gettid()).unwrap();
    r.sched = None;
    r.switches_from_sched = false;
    assert!(!r.has_migrations());
    std::thread::sleep(Duration::from_millis(1));
    let c = r.read().unwrap();
    assert_eq!(c.migrations, 0);
    assert!(c.cpu_ns > 0 && c.voluntary_ctxt_switches > 0, "{c:?}");
}

#[test]
fn thread_reader_of_missing_thread_fails() {
    assert!(ThreadStatReader::open(i32::MAX).is_err());
    let tid = std::thread::spawn(gettid).join().unwrap();
    // The join returns when the kernel clears the thread's tid, which is
    // before it releases the task: /proc may show it a moment longer
    // (seen once in CI). Wait for it to go: then open or read fails.
    let until = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let gone = match ThreadStatReader::open(tid) {
            Err(_) => true,
            Ok(mut r) => r.read().is_err(),
        };
        if gone {
            break;
        }
        assert!(
            std::time::Instant::now() < until,
            "thread {tid} still readable 5 s after it ended"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn run_delay_grows_when_threads_share_a_cpu() {
    let cpu = online_cpus()[0];
    let n = 3;
    let barrier = Arc::new(Barrier::new(n));
    let handles: Vec<_> = (0..n)
        .map(|_| {
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                pin_current_thread(&[cpu]).unwrap();
                let mut r = ThreadStatReader::open(gettid()).unwrap();
                barrier.wait();
                let a = r.read().unwrap();
                spin_for(Duration::from_millis(200));
                let b = r.read().unwrap();
                (b.delta(&a), r.has_migrations())
            })
        })
        .collect();
    for h in handles {
        let (d, _) = h.join().unwrap();
        assert!(d.cpu_ns > 0, "{d:?}");
        assert!(d.run_delay_ns > 0, "{d:?}");
        assert!(d.timeslices > 1, "{d:?}");
        assert!(d.nonvoluntary_ctxt_switches > 0, "{d:?}");
    }
}

#[test]
fn migrations_count_moves_between_cpus() {
    let cpus = online_cpus();
    std::thread::spawn(move || {
        let mut r = ThreadStatReader::open(gettid()).unwrap();
        if !r.has_migrations() {
            eprintln!("skip: no /proc/self/task/TID/sched on this kernel");
            return;
        }
        if cpus.len() < 2 {
            eprintln!("skip: one CPU");
            return;
        }
        let a = r.read().unwrap();
        for &cpu in [cpus[0], cpus[1], cpus[0]].iter() {
            pin_current_thread(&[cpu]).unwrap();
            assert_eq!(current_cpu(), cpu);
        }
        let b = r.read().unwrap();
        assert!(b.delta(&a).migrations >= 1, "{a:?} -> {b:?}");
    })
    .join()
    .unwrap();
}

#[test]
fn pinning_moves_the_thread() {
    let cpus = online_cpus();
    assert!(!cpus.is_empty());
    assert!(cpus.windows(2).all(|w| w[0] < w[1]));
    std::thread::spawn(move || {
        for &cpu in &cpus {
            pin_current_thread(&[cpu]).unwrap();
            for _ in 0..100 {
                assert_eq!(current_cpu(), cpu);
            }
            assert_eq!(current_thread_affinity().unwrap(), vec![cpu]);
        }
        unpin_current_thread().unwrap();
        assert_eq!(current_thread_affinity().unwrap(), cpus);
        assert!(pin_current_thread(&[]).is_err());
        assert!(pin_current_thread(&[MAX_CPU_INDEX + 1]).is_err());
        // A CPU the machine does not have.
        assert!(pin_current_thread(&[100_000]).is_err());
        // Still unpinned after the failures.
        assert_eq!(current_thread_affinity().unwrap(), cpus);
    })
    .join()
    .unwrap();
}

#[test]
fn proc_stat_reader_reads_live_cpus() {
    let mut r = ProcStatReader::open().unwrap();
    let mut a = Vec::new();
    r.read(&mut a).unwrap();
    assert!(!a.is_empty());
    assert!(a.windows(2).all(|w| w[0].cpu < w[1].cpu));
    spin_for(Duration::from_millis(30));
    let mut b = Vec::with_capacity(a.len());
    r.read(&mut b).unwrap();
    assert_eq!(a.len(), b.len());
    let mut usage = Vec::new();
    cpu_usage(&a, &b, &mut usage);
    assert_eq!(usage.len(), a.len());
    for u in &usage {
        assert!((0.0..=100.0).contains(&u.busy_pct), "{u:?}");
    }
    // A tiny buffer grows until the CPU lines fit and gives the same CPUs.
    let mut small = ProcStatReader::with_capacity(16).unwrap();
    let mut c = Vec::new();
    small.read(&mut c).unwrap();
    assert_eq!(
        c.iter().map(|t| t.cpu).collect::<Vec<_>>(),
        b.iter().map(|t| t.cpu).collect::<Vec<_>>()
    );
    assert!(c.iter().zip(&b).all(|(c, b)| c.idle >= b.idle));
    assert!(small.file.buf.len() > 16);
    assert!(clock_ticks_per_sec() > 0);
}

#[test]
fn proc_file_grows_to_whole_file() {
    let mut f = ProcFile::open(Path::new("/proc/self/status"), 16).unwrap();
    let n = f.read_whole().unwrap();
    let text = std::str::from_utf8(&f.buf[..n]).unwrap();
    assert!(text.starts_with("Name:"));
    assert!(parse_status_switches(text).is_some());
    // A second read reuses the buffer and starts again at the top.
    let cap = f.buf.len();
    let n = f.read_whole().unwrap();
    assert_eq!(f.buf.len(), cap);
    assert!(f.buf[..n].starts_with(b"Name:"));
}

#[test]
fn process_totals() {
    let a = process_cpu_time_ns();
    burn_cpu_ns(5_000_000);
    let b = process_cpu_time_ns();
    assert!(b - a >= 5_000_000, "{a} -> {b}");
    let rss = process_rss_bytes();
    assert!(rss > 0 && rss.is_multiple_of(page_size() as u64), "{rss}");
    assert!(page_size().is_power_of_two());
}

// ---- probes ---------------------------------------------------------

#[test]
fn probe_features_finds_io_uring() {
    let f = probe_features();
    eprintln!("{f:#?}");
    match io_uring_disabled_sysctl() {
        Some(v) if v != 0 => {
            eprintln!(
                "skip: kernel.io_uring_disabled = {v}: {:?}",
                f.io_uring_reason
            );
        }
        _ => assert!(f.io_uring, "{:?}", f.io_uring_reason),
    }
    assert_eq!(f.io_uring, f.io_uring_reason.is_none());
    assert_eq!(f.highpri, f.highpri_reason.is_none());
    assert!(f.schedstat);
    let json = serde_json::to_string(&f).unwrap();
    assert_eq!(serde_json::from_str::<Features>(&json).unwrap(), f);
}

#[test]
fn io_uring_reasons_name_the_sysctl() {
    let eperm = io::Error::from_raw_os_error(libc::EPERM);
    let r = io_uring_failure_reason(&eperm, Some(2));
    assert!(r.contains("kernel.io_uring_disabled = 2"), "{r}");
    let enosys = io::Error::from_raw_os_error(libc::ENOSYS);
    let r = io_uring_failure_reason(&enosys, None);
    assert!(r.contains("kernel.io_uring_disabled is not present"), "{r}");
}

#[test]
fn machine_info_describes_this_machine() {
    let dir = tempfile::tempdir().unwrap();
    let m = machine_info(&dir.path().join("not/yet/there"));
    eprintln!("{m:#?}");
    assert_eq!(m.cpus, online_cpus().len());
    assert!(m.memory_bytes > 0);
    assert_ne!(m.cpu_model, "unknown");
    assert_eq!(
        m.kernel,
        std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .unwrap()
            .trim()
    );
    assert_eq!(m.data_dir_fs, fs_type_name(dir.path()));
    let json = serde_json::to_string(&m).unwrap();
    assert_eq!(serde_json::from_str::<MachineInfo>(&json).unwrap(), m);
}

#[test]
fn fs_types_of_known_paths() {
    let root = fs_type_name(Path::new("/"));
    assert_ne!(root, "unknown");
    let dir = tempfile::tempdir().unwrap();
    let tmp = fs_type_name(dir.path());
    assert_ne!(tmp, "unknown");
    assert_eq!(fs_type_name(&dir.path().join("a/b/c")), tmp);
    assert_eq!(fs_type_name(Path::new("/proc/self")), "proc");
    if Path::new("/dev/shm").exists() {
        assert_eq!(fs_type_name(Path::new("/dev/shm")), "tmpfs");
    }
    assert_ne!(
        fs_type_name(Path::new("relative/path/that/is/absent")),
        "unknown"
    );
    eprintln!("/ is {root}, tempdir is {tmp}");
}

#[test]
fn o_direct_probe_answers() {
    for base in ["/tmp", "/dev/shm"] {
        if !Path::new(base).is_dir() {
            continue;
        }
        let mut f = tempfile::NamedTempFile::new_in(base).unwrap();
        f.write_all(&[7u8; 8192]).unwrap();
        f.flush().unwrap();
        let r = supports_o_direct(f.path());
        eprintln!(
            "O_DIRECT on {base} ({}): {r:?}",
            fs_type_name(Path::new(base))
        );
        assert!(r.is_ok(), "{r:?}");
    }
    let err = supports_o_direct(Path::new("/nonexistent/file")).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::NotFound);
}

#[test]
fn dontneed_drops_and_warm_fills_the_page_cache() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data");
    std::fs::write(&path, vec![1u8; 1 << 20]).unwrap();
    let file = File::open(&path).unwrap();
    let pages = (1u64 << 20) / page_size() as u64;
    fadvise_dontneed(&file).unwrap();
    let cold = page_cache_residency(&file).unwrap();
    assert_eq!(cold.total_pages, pages);
    assert_eq!(warm_page_cache(&file).unwrap(), 1 << 20);
    let warm = page_cache_residency(&file).unwrap();
    assert_eq!(warm.resident_pages, pages, "{warm:?}");
    if fs_type_name(dir.path()) == "tmpfs" {
        eprintln!("skip: tmpfs pages cannot be dropped");
    } else {
        assert_eq!(cold.resident_pages, 0, "{cold:?}");
    }
    let empty = File::create(dir.path().join("empty")).unwrap();
    assert_eq!(page_cache_residency(&empty).unwrap(), Residency::default());
}

/// A fake `/sys/devices/system/cpu` tree: for each CPU its SMT siblings, its
/// L3's sharers and its node (L1d/L1i/L2 private, as on most x86 parts).
fn fake_cpu_tree(cpus: &[(usize, &str, &str, usize)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for &(cpu, smt, llc, node) in cpus {
        let c = dir.path().join(format!("cpu{cpu}"));
        std::fs::create_dir_all(c.join("topology")).unwrap();
        std::fs::write(c.join("topology/thread_siblings_list"), format!("{smt}\n")).unwrap();
        for (i, (level, kind, shared)) in [
            (1, "Data", cpu.to_string()),
            (1, "Instruction", cpu.to_string()),
            (2, "Unified", cpu.to_string()),
            (3, "Unified", llc.to_string()),
        ]
        .into_iter()
        .enumerate()
        {
            let d = c.join(format!("cache/index{i}"));
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("level"), format!("{level}\n")).unwrap();
            std::fs::write(d.join("type"), format!("{kind}\n")).unwrap();
            std::fs::write(d.join("shared_cpu_list"), format!("{shared}\n")).unwrap();
        }
        std::fs::create_dir_all(c.join(format!("node{node}"))).unwrap();
    }
    dir
}

fn pods_of(tree: &tempfile::TempDir, cpus: &[usize]) -> [Vec<Vec<usize>>; 4] {
    let t = read_topology(tree.path(), cpus);
    [
        pods_by(&t, |c| c.cpu),
        pods_by(&t, |c| c.smt.clone()),
        pods_by(&t, |c| c.llc.clone()),
        pods_by(&t, |c| c.node),
    ]
}

#[test]
fn pods_of_two_llcs_with_smt_pairs() {
    // 8 CPUs, SMT pairs (n, n+4), two L3s of 4 CPUs each (0,1,4,5 and
    // 2,3,6,7), one node: the layout of a small two-CCX part.
    let mut cpus = Vec::new();
    for cpu in 0..8usize {
        let core = cpu % 4;
        let smt = format!("{},{}", core, core + 4);
        let llc = if core < 2 { "0-1,4-5" } else { "2-3,6-7" };
        cpus.push((cpu, smt, llc, 0));
    }
    let spec: Vec<(usize, &str, &str, usize)> = cpus
        .iter()
        .map(|(c, s, l, n)| (*c, s.as_str(), *l, *n))
        .collect();
    let tree = fake_cpu_tree(&spec);
    let all: Vec<usize> = (0..8).collect();
    let [cpu, smt, cache, numa] = pods_of(&tree, &all);
    assert_eq!(cpu, (0..8).map(|c| vec![c]).collect::<Vec<_>>());
    assert_eq!(smt, vec![vec![0, 4], vec![1, 5], vec![2, 6], vec![3, 7]]);
    assert_eq!(cache, vec![vec![0, 1, 4, 5], vec![2, 3, 6, 7]]);
    assert_eq!(numa, vec![all.clone()]);
    // Under a cpuset of 1, 2 and 5 only those CPUs are pooled.
    let [_, _, cache, _] = pods_of(&tree, &[1, 2, 5]);
    assert_eq!(cache, vec![vec![1, 5], vec![2]]);
}

#[test]
fn pods_of_one_cpu_per_socket() {
    // A VM that shows each vCPU as its own socket, with its own L3 and
    // node: every scope short of system gives one pod per CPU.
    let tree = fake_cpu_tree(&[(0, "0", "0", 0), (1, "1", "1", 1), (2, "2", "2", 2)]);
    let [cpu, smt, cache, numa] = pods_of(&tree, &[0, 1, 2]);
    let single = vec![vec![0], vec![1], vec![2]];
    assert_eq!(cpu, single);
    assert_eq!(smt, single);
    assert_eq!(cache, single);
    assert_eq!(numa, single);
}

#[test]
fn pods_of_one_llc_and_missing_files() {
    // 4 CPUs sharing one L3, no SMT; CPU 3's files are missing: it becomes
    // its own SMT group and LLC, on node 0.
    let tree = fake_cpu_tree(&[(0, "0", "0-3", 0), (1, "1", "0-3", 0), (2, "2", "0-3", 0)]);
    let [_, smt, cache, numa] = pods_of(&tree, &[0, 1, 2, 3]);
    assert_eq!(smt, vec![vec![0], vec![1], vec![2], vec![3]]);
    assert_eq!(cache, vec![vec![0, 1, 2], vec![3]]);
    assert_eq!(numa, vec![vec![0, 1, 2, 3]]);
}

#[test]
fn this_machines_topology_covers_its_cpus() {
    let cpus = online_cpus();
    let t = cpu_topology(&cpus);
    assert_eq!(t.iter().map(|c| c.cpu).collect::<Vec<_>>(), cpus);
    for c in &t {
        assert!(c.smt.contains(&c.cpu) && c.llc.contains(&c.cpu), "{c:?}");
    }
    let pods = pods_by(&t, |c| c.llc.clone());
    assert_eq!(pods.iter().map(Vec::len).sum::<usize>(), cpus.len());
}

#[test]
fn what_reads_iowait_by_governor_and_kernel() {
    let base = MachineInfo {
        kernel: "6.18.44-fc".into(),
        cpuidle_driver: Some("haltpoll".into()),
        cpuidle_governor: Some("haltpoll".into()),
        ..MachineInfo::default()
    };
    assert!(base.iowait_consumers().is_empty());
    let n = base.iowait_notice().unwrap();
    assert!(
        n.contains("cpuidle haltpoll (governor haltpoll), no cpufreq"),
        "{n}"
    );
    let su = MachineInfo {
        cpufreq_driver: Some("acpi-cpufreq".into()),
        cpufreq_governor: Some("schedutil".into()),
        ..base.clone()
    };
    assert_eq!(su.iowait_consumers(), vec!["schedutil's iowait boost"]);
    assert_eq!(su.iowait_notice(), None);
    let hwp = |boost: &str| MachineInfo {
        cpufreq_driver: Some("intel_pstate".into()),
        cpufreq_governor: Some("powersave".into()),
        hwp_dynamic_boost: Some(boost.into()),
        ..base.clone()
    };
    assert!(hwp("0").iowait_consumers().is_empty());
    assert_eq!(hwp("1").iowait_consumers().len(), 1);
    let menu = |kernel: &str| MachineInfo {
        kernel: kernel.into(),
        cpuidle_governor: Some("menu".into()),
        ..base.clone()
    };
    assert_eq!(menu("6.12.1").iowait_consumers().len(), 1);
    assert!(menu("6.13.0").iowait_consumers().is_empty());
    assert_eq!(kernel_version("6.18.44-fc-v1147"), Some((6, 18)));
    assert_eq!(kernel_version("garbage"), None);
}

#[test]
fn a_process_is_known_by_its_exe_parent_and_start_time() {
    // A command holding spaces and a ')' does not shift the fields.
    let stat = "4242 (qemu) (x) S 1 4242 4242 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 3 0 987654 1 2";
    assert_eq!(parse_stat_parent_start(stat), Some((1, 987654)));
    assert_eq!(parse_stat_parent_start("4242 (cut) S 1"), None);
    let me = process_info(std::process::id()).expect("this process");
    assert_eq!(me.exe, std::env::current_exe().ok());
    assert_eq!(me.ppid, std::os::unix::process::parent_id());
    assert_eq!(me.uid, trust::euid());
    assert!(me.start_ticks > 0);
    assert_eq!(process_info(std::process::id()), Some(me));
    assert!(memory_total_bytes().is_some_and(|b| b > 64 << 20));
}

#[test]
fn parses_the_iowait_ticks_of_a_stat_file() {
    // A thread of Linux 6.1 (52 fields), its command with a space and a
    // parenthesis, delayacct_blkio_ticks (field 42) = 37.
    let mut f: Vec<String> = (3..=52).map(|i| i.to_string()).collect();
    f[0] = "S".into();
    f[42 - 3] = "37".into();
    let stat = format!("4242 (reader-0 (x)) {}\n", f.join(" "));
    assert_eq!(parse_stat_blkio_ticks(&stat), Some(37));
    assert_eq!(parse_stat_blkio_ticks("1 (a) S 1 2"), None);
    assert_eq!(parse_stat_blkio_ticks("no parenthesis"), None);
    // This thread's own file parses (0 or more ticks).
    let own = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
    assert!(parse_stat_blkio_ticks(&own).is_some(), "{own}");
}
