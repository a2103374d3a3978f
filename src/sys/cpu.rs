//! Threads and CPUs: the online CPUs, this process's affinity mask, pinning a
//! thread, the CPU a thread runs on; and CPUs as Linux writes them in text,
//! lists (`0-3,6`) and the hex masks of sysfs (`ff,ffffffff`).

#[allow(unused_imports)]
use super::*;

/// The kernel thread id of the calling thread.
pub fn gettid() -> i32 {
    // SAFETY: gettid(2) takes no arguments, touches no memory and cannot fail.
    let tid = unsafe { libc::syscall(libc::SYS_gettid) };
    tid as i32
}

/// The CPU the calling thread is running on right now (`sched_getcpu(3)`).
///
/// glibc answers from the rseq area or the vDSO, so this is cheap enough to
/// call once per I/O. The answer may be stale by the time it is used unless the
/// thread is pinned. Returns 0 if the kernel cannot tell (never seen on Linux).
pub fn current_cpu() -> usize {
    // SAFETY: sched_getcpu takes no arguments and only returns a value.
    let cpu = unsafe { libc::sched_getcpu() };
    usize::try_from(cpu).unwrap_or(0)
}

/// Bits per word of a kernel CPU mask (`unsigned long`).
pub(super) const MASK_WORD_BITS: usize = libc::c_ulong::BITS as usize;
/// The largest CPU index accepted by [`pin_current_thread`]; anything above is a
/// caller bug, not a CPU.
pub(super) const MAX_CPU_INDEX: usize = 1 << 20;

pub(super) fn mask_to_cpus(words: &[libc::c_ulong]) -> Vec<usize> {
    let mut cpus = Vec::new();
    for (i, &word) in words.iter().enumerate() {
        let mut w = word;
        while w != 0 {
            cpus.push(i * MASK_WORD_BITS + w.trailing_zeros() as usize);
            w &= w - 1;
        }
    }
    cpus
}

pub(super) fn cpus_to_mask(cpus: &[usize]) -> Vec<libc::c_ulong> {
    let max = cpus.iter().copied().max().unwrap_or(0);
    // At least the size of glibc's cpu_set_t (1024 CPUs); the kernel ignores
    // bits beyond its own CPU count.
    let words = (max / MASK_WORD_BITS + 1).max(1024 / MASK_WORD_BITS);
    let mut mask = vec![0 as libc::c_ulong; words];
    for &cpu in cpus {
        mask[cpu / MASK_WORD_BITS] |= 1 << (cpu % MASK_WORD_BITS);
    }
    mask
}

/// `sched_getaffinity(pid)` as a sorted list of CPU indices, growing the mask
/// until it is as large as the kernel's (machines with more than 1024 CPUs).
pub(super) fn affinity_of(pid: libc::pid_t) -> io::Result<Vec<usize>> {
    let mut words: Vec<libc::c_ulong> = vec![0; 1024 / MASK_WORD_BITS];
    loop {
        let bytes = std::mem::size_of_val(words.as_slice());
        // SAFETY: `words` is a live, writable buffer of exactly `bytes` bytes,
        // suitably aligned for `unsigned long` (the kernel's mask word, and
        // cpu_set_t's). The kernel writes at most `bytes` bytes into it; glibc
        // only zeroes the part the kernel did not write, also within `bytes`.
        let rc = unsafe {
            libc::sched_getaffinity(pid, bytes, words.as_mut_ptr().cast::<libc::cpu_set_t>())
        };
        if rc == 0 {
            return Ok(mask_to_cpus(&words));
        }
        let err = io::Error::last_os_error();
        if err.raw_os_error() == Some(libc::EINVAL) && words.len() < MAX_CPU_INDEX / MASK_WORD_BITS
        {
            let len = words.len() * 2;
            words.resize(len, 0);
            continue;
        }
        return Err(err);
    }
}

/// The CPUs the process was allowed to use when this module first looked
/// (the first call to [`online_cpus`], [`pin_current_thread`] or
/// [`unpin_current_thread`]; call `online_cpus()` early in `main` to make that
/// "startup").
pub(super) fn process_mask() -> &'static [usize] {
    static MASK: OnceLock<Vec<usize>> = OnceLock::new();
    MASK.get_or_init(|| {
        // SAFETY: getpid(2) takes no arguments and cannot fail.
        let pid = unsafe { libc::getpid() };
        // The main thread's mask (its tid is the pid) is the process's mask,
        // even when the first caller is an already pinned worker.
        affinity_of(pid)
            .or_else(|_| affinity_of(0))
            .ok()
            .filter(|cpus| !cpus.is_empty())
            .unwrap_or_else(|| {
                let n = std::thread::available_parallelism().map_or(1, |n| n.get());
                (0..n).collect()
            })
    })
}

/// The CPUs this process may run on, sorted: the affinity mask of the process
/// (its main thread) as captured once at startup, which is what `taskset` or a
/// cpuset cgroup allowed. Not changed by later pinning of threads.
pub fn online_cpus() -> Vec<usize> {
    process_mask().to_vec()
}

/// How many CPUs the machine has online: the kernel's `num_online_cpus()`,
/// which sizes a workqueue's default `max_active` whatever CPUs a process
/// may use (`sysconf(_SC_NPROCESSORS_ONLN)`, at least 1).
pub fn online_count() -> usize {
    // SAFETY: sysconf(3) takes a constant name and only returns a value.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    if n >= 1 {
        n as usize
    } else {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    }
}

/// Pins the calling thread to `cpus` (`sched_setaffinity(0, ...)`).
pub fn pin_current_thread(cpus: &[usize]) -> io::Result<()> {
    pin_thread(0, cpus)
}

/// Pins thread `tid` of this process (0: the calling thread) to `cpus`,
/// as [`pin_current_thread`] does the calling one: a workqueue's waker
/// points a sleeping worker at its pod (the kernel's `wake_cpu`).
pub fn pin_thread(tid: i32, cpus: &[usize]) -> io::Result<()> {
    // Capture the process mask before the first change of any thread's mask.
    let _ = process_mask();
    if cpus.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "cannot pin a thread to an empty CPU set",
        ));
    }
    if let Some(&bad) = cpus.iter().find(|&&c| c > MAX_CPU_INDEX) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("CPU index {bad} is out of range"),
        ));
    }
    let mask = cpus_to_mask(cpus);
    // SAFETY: `mask` is a live buffer of exactly the size passed, aligned for
    // `unsigned long`; the kernel only reads from it. pid 0 is the calling thread.
    let rc = unsafe {
        libc::sched_setaffinity(
            tid,
            std::mem::size_of_val(mask.as_slice()),
            mask.as_ptr().cast::<libc::cpu_set_t>(),
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Lets the calling thread run on every CPU of the process mask captured at
/// startup again.
pub fn unpin_current_thread() -> io::Result<()> {
    pin_current_thread(process_mask())
}

/// The calling thread's CPU affinity right now, sorted.
pub fn current_thread_affinity() -> io::Result<Vec<usize>> {
    affinity_of(0)
}

/// Thread `tid`'s CPU affinity right now, sorted.
pub fn thread_affinity(tid: i32) -> io::Result<Vec<usize>> {
    affinity_of(tid)
}

/// Largest CPU number accepted before the machine is known (the kernel's
/// `CONFIG_NR_CPUS` tops out at 8192).
pub const MAX_CPU_NUMBER: usize = 8191;

/// The message for a CPU number above [`MAX_CPU_NUMBER`].
pub fn cpu_number_error(n: impl std::fmt::Display) -> String {
    CpuListError::OutOfRange(n.to_string()).to_string()
}

/// Why a CPU list (`0-3,6`) could not be read: the entry at fault, as
/// written, and what is allowed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CpuListError {
    /// An entry that is not a decimal number.
    #[error("{0:?} is not a CPU number")]
    NotANumber(String),
    /// A number above [`MAX_CPU_NUMBER`], as written.
    #[error("CPU {0} is out of range: CPU numbers are 0..={MAX_CPU_NUMBER}")]
    OutOfRange(String),
    /// Two commas with nothing between them (or a leading or trailing one).
    #[error("empty entry in CPU list")]
    EmptyEntry,
    /// A range whose start is above its end.
    #[error("range {start}-{end} is backwards (did you mean {end}-{start}?)")]
    Backwards {
        /// The range's first CPU as written.
        start: usize,
        /// Its last.
        end: usize,
    },
}

/// Parse a Linux-style CPU list: `"0-3,6"` is `[0, 1, 2, 3, 6]`; `""` is
/// empty. Order is kept as written.
pub fn parse_cpu_list(s: &str) -> Result<Vec<usize>, CpuListError> {
    let s = s.trim();
    let mut out = Vec::new();
    if s.is_empty() {
        return Ok(out);
    }
    let number = |t: &str| -> Result<usize, CpuListError> {
        let t = t.trim();
        if t.is_empty() || !t.chars().all(|c| c.is_ascii_digit()) {
            return Err(CpuListError::NotANumber(t.to_string()));
        }
        t.parse::<usize>()
            .ok()
            .filter(|&n| n <= MAX_CPU_NUMBER)
            .ok_or_else(|| CpuListError::OutOfRange(t.to_string()))
    };
    for part in s.split(',') {
        let part = part.trim();
        if part.is_empty() {
            return Err(CpuListError::EmptyEntry);
        }
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (number(a)?, number(b)?);
                if a > b {
                    return Err(CpuListError::Backwards { start: a, end: b });
                }
                out.extend(a..=b);
            }
            None => out.push(number(part)?),
        }
    }
    Ok(out)
}

/// Format CPUs as a Linux-style CPU list, `[0, 1, 2, 3, 6]` as `"0-3,6"`.
pub fn format_cpu_list(cpus: &[usize]) -> String {
    let mut parts = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        if j > i {
            parts.push(format!("{}-{}", cpus[i], cpus[j]));
        } else {
            parts.push(cpus[i].to_string());
        }
        i = j + 1;
    }
    parts.join(",")
}

/// The most CPUs a mask may name ([`parse_cpu_mask_hex`] refuses CPU
/// numbers from this one up).
pub const MAX_CPUS: usize = 4096;

/// The most 32-bit words a mask text may have (leading zero words
/// included, as a kernel with many possible CPUs prints them).
const MAX_MASK_WORDS: usize = 1024;

/// A CPU list as the hex mask sysfs takes: 32-bit words, most significant
/// first, separated by commas, every word but the first printed with 8
/// digits, the way the kernel prints a bitmap (`[0, 1]` -> `3`, `[0, 33]`
/// -> `2,00000001`; no CPUs -> `0`).
pub fn cpu_mask_hex(cpus: &[usize]) -> String {
    let Some(&max) = cpus.iter().max() else {
        return "0".to_string();
    };
    let mut words = vec![0u32; max / 32 + 1];
    for &c in cpus {
        if let Some(w) = words.get_mut(c / 32) {
            *w |= 1 << (c % 32);
        }
    }
    let mut out = String::new();
    for (i, w) in words.iter().rev().enumerate() {
        if i == 0 {
            out.push_str(&format!("{w:x}"));
        } else {
            out.push_str(&format!(",{w:08x}"));
        }
    }
    out
}

/// Why a hex CPU mask (`ff,ffffffff`) could not be read: the mask (or its
/// start) and the word at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CpuMaskError {
    /// Nothing but white space.
    #[error("an empty CPU mask")]
    Empty,
    /// More words than a mask may have (1024).
    #[error("CPU mask {start:?}... has {words} words, more than {MAX_MASK_WORDS}")]
    TooManyWords {
        /// The mask's first 20 characters.
        start: String,
        /// How many words it has.
        words: usize,
    },
    /// A word that is not 1 to 8 hex digits.
    #[error(
        "CPU mask {mask:?}: {word:?} is not a word of 1 to 8 hex digits (a mask is hex words separated by commas, e.g. ff,ffffffff)"
    )]
    BadWord {
        /// The mask, trimmed.
        mask: String,
        /// The word.
        word: String,
    },
    /// A word the number parser refused.
    #[error("CPU mask {mask:?}: {word:?}: {source}")]
    Number {
        /// The mask, trimmed.
        mask: String,
        /// The word.
        word: String,
        /// The parser's error.
        source: std::num::ParseIntError,
    },
    /// A CPU from [`MAX_CPUS`] up.
    #[error(
        "CPU mask {mask:?} names CPU {cpu}; at most {MAX_CPUS} CPUs (0-{}) are allowed",
        MAX_CPUS - 1
    )]
    TooHigh {
        /// The mask, trimmed.
        mask: String,
        /// The CPU it names.
        cpu: usize,
    },
}

/// A hex CPU mask as sysfs prints it (`ff,ffffffff`, surrounding white
/// space ignored) -> the sorted CPU list. Refuses anything but hex words
/// of at most 8 digits separated by single commas, and CPUs from
/// [`MAX_CPUS`] up.
pub fn parse_cpu_mask_hex(s: &str) -> Result<Vec<usize>, CpuMaskError> {
    let t = s.trim();
    if t.is_empty() {
        return Err(CpuMaskError::Empty);
    }
    let words: Vec<&str> = t.split(',').collect();
    if words.len() > MAX_MASK_WORDS {
        return Err(CpuMaskError::TooManyWords {
            start: t.chars().take(20).collect::<String>(),
            words: words.len(),
        });
    }
    let mut cpus = Vec::new();
    for (i, w) in words.iter().rev().enumerate() {
        if w.is_empty() || w.len() > 8 || !w.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(CpuMaskError::BadWord {
                mask: t.to_string(),
                word: w.to_string(),
            });
        }
        let v = u32::from_str_radix(w, 16).map_err(|source| CpuMaskError::Number {
            mask: t.to_string(),
            word: w.to_string(),
            source,
        })?;
        for b in 0..32 {
            if v & (1 << b) != 0 {
                let cpu = i * 32 + b;
                if cpu >= MAX_CPUS {
                    return Err(CpuMaskError::TooHigh {
                        mask: t.to_string(),
                        cpu,
                    });
                }
                cpus.push(cpu);
            }
        }
    }
    cpus.sort_unstable();
    Ok(cpus)
}

#[cfg(test)]
mod mask_tests {
    use super::*;

    #[test]
    fn cpu_lists_become_kernel_masks() {
        assert_eq!(cpu_mask_hex(&[]), "0");
        assert_eq!(cpu_mask_hex(&[0, 1]), "3");
        assert_eq!(cpu_mask_hex(&[1, 0, 1]), "3");
        assert_eq!(cpu_mask_hex(&(0..8).collect::<Vec<_>>()), "ff");
        assert_eq!(cpu_mask_hex(&[0, 33]), "2,00000001");
        assert_eq!(cpu_mask_hex(&[32]), "1,00000000");
        assert_eq!(cpu_mask_hex(&(0..40).collect::<Vec<_>>()), "ff,ffffffff");
        assert_eq!(cpu_mask_hex(&[64]), "1,00000000,00000000");
    }

    #[test]
    fn kernel_masks_become_cpu_lists() {
        assert_eq!(parse_cpu_mask_hex("3\n").unwrap(), [0, 1]);
        assert_eq!(parse_cpu_mask_hex("0").unwrap(), Vec::<usize>::new());
        assert_eq!(parse_cpu_mask_hex("1,00000000").unwrap(), [32]);
        assert_eq!(parse_cpu_mask_hex("2,00000001").unwrap(), [0, 33]);
        assert_eq!(parse_cpu_mask_hex("00000000,00000003").unwrap(), [0, 1]);
        assert_eq!(
            parse_cpu_mask_hex("FF").unwrap(),
            (0..8).collect::<Vec<_>>()
        );
        assert_eq!(
            parse_cpu_mask_hex("ff,ffffffff").unwrap(),
            (0..40).collect::<Vec<_>>()
        );
        // CPU 4095 is the last allowed; 4096 is one too many.
        let mut top = vec!["80000000"];
        top.extend(std::iter::repeat_n("00000000", 127));
        assert_eq!(parse_cpu_mask_hex(&top.join(",")).unwrap(), [4095]);
        let mut over = vec!["1"];
        over.extend(std::iter::repeat_n("00000000", 128));
        assert!(parse_cpu_mask_hex(&over.join(",")).is_err());
        // Leading zero words past 4096 bits are fine.
        let mut wide = vec!["0"; 200];
        wide.push("1");
        assert_eq!(parse_cpu_mask_hex(&wide.join(",")).unwrap(), [0]);
        for bad in [
            "",
            " ",
            "xyz",
            "0x3",
            "1,,2",
            ",1",
            "1,",
            "123456789",
            "-1",
            "1 2",
            "ff;ff",
        ] {
            assert!(parse_cpu_mask_hex(bad).is_err(), "{bad:?}");
        }
        assert!(parse_cpu_mask_hex(&vec!["0"; 2000].join(",")).is_err());
    }

    #[test]
    fn masks_round_trip() {
        for cpus in [
            vec![0],
            vec![0, 1],
            vec![5, 31, 32, 63, 64, 100],
            (0..256).collect(),
            vec![4095],
        ] {
            assert_eq!(parse_cpu_mask_hex(&cpu_mask_hex(&cpus)).unwrap(), cpus);
        }
    }
}
