//! `readpath bench crypto`: what this machine's CPU can do per core for
//! each stage readpath models (AES-256-XTS on AES instructions, the
//! software AES, the port of the kernel's `aes-fixed-time`, Adiantum, SHA-256 and a cached fs-verity block check), on
//! 4096-byte data units, next to `openssl speed` where openssl has the
//! same primitive. Both sides are timed in CPU time of the thread doing the
//! work (openssl's default divisor), alternating rounds, one core pinned,
//! so a busy machine shifts both alike; the median round is reported.
//! Last, the cost of handing the same work to the running kernel through
//! AF_ALG (`pipeline.cipher = "kernel"`, `pipeline.hash = "kernel"`): per
//! 4 KiB unit and per 128 KiB bio, readpath's own code against the kernel's
//! driver, single thread, wall time per operation and their ratio.

use std::process::Command;

use serde::{Deserialize, Serialize};

use crate::crypto::{CipherKind, ContentsCipher};
use crate::metrics::median;
use crate::verity::merkle::{MerkleParams, MerkleTree};
use crate::verity::sha256x2::{Prefix, Sha256x2};

/// Bytes per operation: one fscrypt data unit, one fs-verity block.
pub const UNIT: usize = 4096;

/// One primitive's per-core throughput.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CryptoResult {
    /// `aes-256-xts`, `aes-256-xts-soft`, `aes-256-xts-ti`, `aes-256-xts-ni4`, `adiantum`, `sha256`, `sha256-generic` (the port of the kernel's generic C), `sha256-2x`
    /// (two blocks at once; only where the CPU has the SHA extensions),
    /// `fsverity-verify`, `kernel-copy` (the page-cache readers' copy, not
    /// crypto: `pread` of 128 KiB from a memfd).
    pub name: String,
    /// Median over rounds, bytes per CPU-second.
    pub bytes_per_s: f64,
    /// `openssl speed -bytes 4096 -evp ...` on the same core, when openssl
    /// is installed and has the primitive.
    pub openssl_bytes_per_s: Option<f64>,
    /// `bytes_per_s / openssl_bytes_per_s`.
    pub ratio: Option<f64>,
    /// What ran it (e.g. `aes-ni x8`, `sha2 crate`).
    pub implementation: String,
}

/// The whole report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CryptoReport {
    /// Per primitive.
    pub results: Vec<CryptoResult>,
    /// CPU time per measurement, seconds.
    pub seconds: f64,
    /// Rounds (median taken).
    pub rounds: u32,
    /// The CPU the thread was pinned to.
    pub cpu: usize,
    /// openssl's version line, if found.
    pub openssl: Option<String>,
    /// readpath's own code against the kernel's through AF_ALG.
    #[serde(default)]
    pub afalg: Vec<AfAlgRow>,
    /// Why the AF_ALG rows are missing (or some of them), if they are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub afalg_missing: Option<String>,
}

/// One operation done by readpath's code and by the kernel via AF_ALG.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AfAlgRow {
    /// `xts decrypt 4K unit`, `xts decrypt 128K bio`, `sha256 4K block`,
    /// `sha256 128K bio`.
    pub name: String,
    /// AF_ALG calls (one `sendmsg` + one read each) per operation.
    pub calls: u32,
    /// readpath's own, median ns per operation (wall time).
    pub software_ns: f64,
    /// The kernel's via AF_ALG, median ns per operation (wall time).
    pub afalg_ns: f64,
    /// `afalg_ns / software_ns`.
    pub ratio: f64,
    /// `(afalg_ns - software_ns) / calls`: what one AF_ALG call adds.
    pub overhead_per_call_ns: f64,
    /// readpath's implementation and the kernel's driver (`/proc/crypto`).
    pub implementation: String,
}

fn thread_cpu_s() -> f64 {
    crate::sys::thread_cpu_time_ns() as f64 / 1e9
}

/// Runs `op` (one 4096-byte unit per call) for `secs` of CPU time; bytes/s.
fn measure(secs: f64, mut op: impl FnMut(u64)) -> f64 {
    let start = thread_cpu_s();
    let mut n = 0u64;
    loop {
        for _ in 0..64 {
            op(n);
            n += 1;
        }
        let t = thread_cpu_s() - start;
        if t >= secs {
            return (n as usize * UNIT) as f64 / t;
        }
    }
}

/// `openssl speed -seconds S -bytes 4096 [-decrypt] -evp ALG`, pinned to
/// `cpu`; bytes/s (openssl prints thousands of bytes per second).
pub fn openssl_speed(alg: &str, decrypt: bool, seconds: u32, cpu: usize) -> Option<f64> {
    let mut cmd = Command::new("taskset");
    cmd.args(["-c", &cpu.to_string(), "openssl", "speed"]);
    cmd.args([
        "-seconds",
        &seconds.to_string(),
        "-bytes",
        &UNIT.to_string(),
    ]);
    if decrypt {
        cmd.arg("-decrypt");
    }
    cmd.args(["-evp", alg]);
    let out = cmd.output().ok()?;
    if !out.status.success() {
        return None;
    }
    parse_openssl_speed(&String::from_utf8_lossy(&out.stdout))
}

/// The last table line's last figure (`AES-256-XTS   5412345.67k`), in bytes/s.
pub fn parse_openssl_speed(text: &str) -> Option<f64> {
    let line = text.lines().rev().find(|l| l.trim_end().ends_with('k'))?;
    let last = line.split_whitespace().last()?;
    last.strip_suffix('k')?
        .parse::<f64>()
        .ok()
        .map(|k| k * 1000.0)
}

fn openssl_version() -> Option<String> {
    let out = Command::new("openssl").arg("version").output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Measures every primitive; `progress` hears each name before it runs.
pub fn crypto(seconds: f64, rounds: u32, progress: &mut dyn FnMut(&str)) -> CryptoReport {
    let cpu = crate::sys::current_cpu();
    let _ = crate::sys::pin_current_thread(&[cpu]);
    let openssl = openssl_version();
    let whole_s = (seconds.ceil() as u32).max(1);
    let mut buf = vec![0x5au8; UNIT];
    let has_openssl = openssl.is_some();
    let mut results = cipher_rows(
        seconds,
        rounds,
        has_openssl,
        whole_s,
        cpu,
        &mut buf,
        progress,
    );
    progress("sha256");
    results.push(sha256_row(seconds, rounds, has_openssl, whole_s, cpu, &buf));
    // The rows below hash too: they are set against openssl's sha256.
    let sha_openssl = results.last().and_then(|r| r.openssl_bytes_per_s);
    // The port of the kernel's generic C (`pipeline.hash = "generic"`).
    progress("sha256-generic");
    results.push(against(
        sha256_generic_row(seconds, rounds, &buf),
        sha_openssl,
    ));
    // Two blocks hashed together (what verification does where the CPU has
    // the SHA extensions), against openssl's one-stream figure.
    if let Some(x2) = Sha256x2::detect() {
        progress("sha256-2x");
        results.push(against(
            sha256x2_row(&x2, seconds, rounds, &buf),
            sha_openssl,
        ));
    }
    // The whole per-block check on the cache-hit path: hash the data block,
    // compare with the already verified leaf entry.
    progress("fsverity-verify");
    results.push(against(verify_row(seconds, rounds), sha_openssl));
    // The application's copy of a page-cache read, as the model's readers
    // make it (a `pread` of the cache's memfd), not crypto but in every
    // miss: `bench/paths.sh` counts it in a second limit.
    progress("kernel-copy");
    if let Some(r) = copy_row(seconds, rounds) {
        results.push(r);
    }
    progress("af_alg");
    let (afalg, afalg_missing) = afalg_rows(seconds, rounds);
    let _ = crate::sys::unpin_current_thread();
    CryptoReport {
        results,
        seconds,
        rounds,
        cpu,
        openssl,
        afalg,
        afalg_missing,
    }
}

/// Bytes of the bio the AF_ALG rows time (32 data units).
pub const BIO: usize = 128 * 1024;

/// Runs `op` for `secs` of wall time; mean ns per call.
fn ns_per_op(secs: f64, mut op: impl FnMut(u64)) -> f64 {
    let start = std::time::Instant::now();
    let mut n = 0u64;
    loop {
        for _ in 0..16 {
            op(n);
            n += 1;
        }
        let t = start.elapsed().as_secs_f64();
        if t >= secs {
            return t * 1e9 / n as f64;
        }
    }
}

/// readpath's AES-256-XTS and SHA-256 against the kernel's through AF_ALG,
/// per 4 KiB unit and per 128 KiB bio, alternating rounds; the rows, and
/// why some are missing (no AF_ALG here).
fn afalg_rows(seconds: f64, rounds: u32) -> (Vec<AfAlgRow>, Option<String>) {
    let secs = seconds / 2.0;
    let mut rows = Vec::new();
    let mut missing = Vec::new();
    let driver = |alg: &str| {
        crate::kernel::crypto_driver(alg).map_or_else(|| "driver unknown".into(), |(d, _)| d)
    };
    let mut buf = vec![0x5au8; BIO];
    // Distinct halves: the kernel's xts refuses equal ones in FIPS mode.
    let key: [u8; 64] = std::array::from_fn(|i| i as u8);
    match ContentsCipher::new(CipherKind::Kernel, &key) {
        Err(e) => missing.push(e.to_string()),
        Ok(k) => {
            // The model's own loop, and the port of Linux 6.1's
            // `xts-aes-aesni` loop, each against the kernel's driver.
            for (kind, rows_named) in [
                (
                    CipherKind::Aes256Xts,
                    [("xts decrypt 4K unit", UNIT), ("xts decrypt 128K bio", BIO)],
                ),
                (
                    CipherKind::Aes256XtsNi4,
                    [("ni4 decrypt 4K unit", UNIT), ("ni4 decrypt 128K bio", BIO)],
                ),
            ] {
                let ours = ContentsCipher::new(kind, &key).expect("64-byte key");
                let what = format!(
                    "{} vs {}",
                    ours.backend(),
                    driver(crate::crypto::KERNEL_XTS)
                );
                for (name, len) in rows_named {
                    let b = &mut buf[..len];
                    let (mut sw, mut ka) = (Vec::new(), Vec::new());
                    for _ in 0..rounds {
                        sw.push(ns_per_op(secs, |i| ours.decrypt_units(i, UNIT, b)));
                        ka.push(ns_per_op(secs, |i| k.decrypt_units(i, UNIT, b)));
                    }
                    rows.push(afalg_row(name, (len / UNIT) as u32, sw, ka, &what));
                }
            }
        }
    }
    use crate::verity::merkle::HashKind;
    // Blocks of 4 KiB, as fs-verity hashes them, and one of 64 KiB (the
    // largest Merkle block): one call for sixteen 4 KiB blocks' bytes, so
    // the row is the kernel's hashing nearly without AF_ALG's call, the
    // figure the port's own cost is held against.
    let driver_name = driver(crate::verity::merkle::KERNEL_SHA256);
    for (block, rows_named) in [
        (
            UNIT,
            &[
                ("sha256 4K block", UNIT, HashKind::Software),
                ("sha256 128K bio", BIO, HashKind::Software),
                ("generic 4K block", UNIT, HashKind::Generic),
                ("generic 128K bio", BIO, HashKind::Generic),
            ][..],
        ),
        (
            16 * UNIT,
            &[("generic 64K, 1 call", 16 * UNIT, HashKind::Generic)][..],
        ),
    ] {
        let data = vec![0xa5u8; 2 * block];
        let params = MerkleParams::new(block, &[]).expect("a valid block size");
        let soft = MerkleTree::build(params, &data);
        let kt = match soft.with_hash(HashKind::Kernel) {
            Err(e) => {
                missing.push(format!("hash = \"kernel\": {e}"));
                break;
            }
            Ok(kt) => kt,
        };
        let mut h = [0u8; 32];
        for &(name, len, kind) in rows_named {
            let ours = soft
                .with_hash(kind)
                .expect("software hashing needs nothing");
            let what = format!(
                "{} vs {driver_name}",
                match kind {
                    HashKind::Generic => "linux sha256.c port",
                    _ => "sha2 crate",
                }
            );
            let b = &buf[..len];
            let (mut sw, mut ka) = (Vec::new(), Vec::new());
            let mut each = |t: &MerkleTree| {
                for blk in b.chunks_exact(block) {
                    t.hash_data_block(blk, &mut h);
                }
                std::hint::black_box(&h);
            };
            for _ in 0..rounds {
                sw.push(ns_per_op(secs, |_| each(&ours)));
                ka.push(ns_per_op(secs, |_| each(&kt)));
            }
            rows.push(afalg_row(name, (len / block) as u32, sw, ka, &what));
        }
    }
    (rows, (!missing.is_empty()).then(|| missing.join("; ")))
}

fn afalg_row(name: &str, calls: u32, sw: Vec<f64>, ka: Vec<f64>, what: &str) -> AfAlgRow {
    let (software_ns, afalg_ns) = (median(sw), median(ka));
    AfAlgRow {
        name: name.into(),
        calls,
        software_ns,
        afalg_ns,
        ratio: afalg_ns / software_ns,
        overhead_per_call_ns: (afalg_ns - software_ns) / calls as f64,
        implementation: what.into(),
    }
}

/// One row per contents cipher: ours, and openssl's where it has the cipher.
fn cipher_rows(
    seconds: f64,
    rounds: u32,
    has_openssl: bool,
    whole_s: u32,
    cpu: usize,
    buf: &mut [u8],
    progress: &mut dyn FnMut(&str),
) -> Vec<CryptoResult> {
    let mut results = Vec::new();
    let key = [0x42u8; 64];
    let ciphers = [
        (CipherKind::Aes256Xts, Some("aes-256-xts")),
        (CipherKind::Aes256XtsSoft, None),
        (CipherKind::Aes256XtsTi, None),
        (CipherKind::Aes256XtsNi4, Some("aes-256-xts")),
        (CipherKind::Adiantum, None),
    ];
    for (kind, ossl) in ciphers {
        progress(kind.name());
        let c = ContentsCipher::new(kind, &key[..kind.key_size()]).expect("valid key size");
        let mut ours = Vec::new();
        let mut theirs = Vec::new();
        for _ in 0..rounds {
            ours.push(measure(seconds, |i| c.decrypt_unit(i, buf)));
            if let (Some(alg), true) = (ossl, has_openssl)
                && let Some(v) = openssl_speed(alg, true, whole_s, cpu)
            {
                theirs.push(v);
            }
        }
        results.push(result(kind.name(), ours, theirs, c.backend().to_string()));
    }
    results
}

/// SHA-256 of one unit: the sha2 crate, and openssl's.
fn sha256_row(
    seconds: f64,
    rounds: u32,
    has_openssl: bool,
    whole_s: u32,
    cpu: usize,
    buf: &[u8],
) -> CryptoResult {
    let mut ours = Vec::new();
    let mut theirs = Vec::new();
    for _ in 0..rounds {
        ours.push(measure(seconds, |_| {
            use sha2::Digest;
            std::hint::black_box(sha2::Sha256::digest(buf));
        }));
        if has_openssl && let Some(v) = openssl_speed("sha256", false, whole_s, cpu) {
            theirs.push(v);
        }
    }
    result("sha256", ours, theirs, "sha2 crate".into())
}

/// SHA-256 of one unit by the port of the kernel's generic C.
fn sha256_generic_row(seconds: f64, rounds: u32, buf: &[u8]) -> CryptoResult {
    let ours = (0..rounds)
        .map(|_| {
            measure(seconds, |_| {
                std::hint::black_box(crate::verity::sha256_generic::Sha256Generic::digest(buf));
            })
        })
        .collect();
    result(
        "sha256-generic",
        ours,
        Vec::new(),
        "linux lib/crypto/sha256.c port".into(),
    )
}

/// Two blocks hashed together (what verification does where the CPU has the SHA extensions).
fn sha256x2_row(x2: &Sha256x2, seconds: f64, rounds: u32, buf: &[u8]) -> CryptoResult {
    let prefix = Prefix::new(&[]);
    let other = vec![0xa5u8; UNIT];
    let (mut ha, mut hb) = ([0u8; 32], [0u8; 32]);
    let ours: Vec<f64> = (0..rounds)
        .map(|_| {
            // One call hashes two units: count it on every other op.
            measure(seconds, |i| {
                if i % 2 == 0 {
                    x2.finup2(&prefix, buf, &other, &mut ha, &mut hb);
                    std::hint::black_box((&ha, &hb));
                }
            })
        })
        .collect();
    result(
        "sha256-2x",
        ours,
        Vec::new(),
        "2-way interleaved SHA-NI".into(),
    )
}

/// The page-cache readers' copy: `pread` of 128 KiB (one read of the
/// max-throughput preset) from a 16 MiB memfd of written pages (a cache's
/// frames) into one buffer, going round the memfd. None: no memfd here.
fn copy_row(seconds: f64, rounds: u32) -> Option<CryptoResult> {
    const READ: usize = 128 * 1024;
    const SIZE: usize = 16 << 20;
    let mem = crate::sys::SharedMem::new("readpath-bench-copy", SIZE).ok()?;
    // SAFETY: `SIZE` bytes mapped read-write, this function's own.
    unsafe { std::ptr::write_bytes(mem.ptr(), 0x5a, SIZE) };
    let mut buf = vec![0u8; READ];
    let per = (READ / UNIT) as u64;
    let ours: Vec<f64> = (0..rounds)
        .map(|_| {
            // One call copies `per` units: count it on every per-th op.
            measure(seconds, |i| {
                if i % per == 0 {
                    let at = (i / per * READ as u64) % SIZE as u64;
                    // SAFETY: `buf` is `READ` writable bytes.
                    let n = unsafe { crate::sys::pread_raw(mem.fd(), buf.as_mut_ptr(), READ, at) };
                    std::hint::black_box((n, &buf));
                }
            })
        })
        .collect();
    Some(result(
        "kernel-copy",
        ours,
        Vec::new(),
        "pread 128K of a memfd".into(),
    ))
}

/// The whole per-block check on the cache-hit path over a 4 MiB tree, in pairs as the pipeline verifies.
fn verify_row(seconds: f64, rounds: u32) -> CryptoResult {
    let data: Vec<u8> = (0..(4usize << 20)).map(|i| (i * 131 % 251) as u8).collect();
    let params = MerkleParams::new(UNIT, &[]).expect("4096 is a valid block size");
    let tree = MerkleTree::build(params, &data);
    let cache = tree.new_cache();
    let blocks = (data.len() / UNIT) as u64;
    for b in 0..blocks {
        let _ = tree.verify_block(&cache, b, &data[b as usize * UNIT..][..UNIT]);
    }
    // In pairs, as the pipeline verifies (one call checks two blocks).
    let ours: Vec<f64> = (0..rounds)
        .map(|_| {
            measure(seconds, |i| {
                if i % 2 == 0 {
                    let b = i % blocks;
                    let r = tree.verify_block_pair(
                        &cache,
                        [b, b + 1],
                        [
                            &data[b as usize * UNIT..][..UNIT],
                            &data[(b + 1) as usize * UNIT..][..UNIT],
                        ],
                    );
                    std::hint::black_box(r[0].is_ok() && r[1].is_ok());
                }
            })
        })
        .collect();
    let implementation = if Sha256x2::detect().is_some() {
        "tree walk + 2-way SHA-NI, in pairs"
    } else {
        "tree walk + sha2"
    };
    result("fsverity-verify", ours, Vec::new(), implementation.into())
}

/// `r` set against another primitive's openssl figure.
fn against(mut r: CryptoResult, openssl_bytes_per_s: Option<f64>) -> CryptoResult {
    r.openssl_bytes_per_s = openssl_bytes_per_s;
    r.ratio = openssl_bytes_per_s.map(|o| r.bytes_per_s / o);
    r
}

fn result(name: &str, ours: Vec<f64>, theirs: Vec<f64>, implementation: String) -> CryptoResult {
    let bytes_per_s = median(ours);
    let openssl_bytes_per_s = (!theirs.is_empty()).then(|| median(theirs));
    CryptoResult {
        name: name.to_string(),
        bytes_per_s,
        openssl_bytes_per_s,
        ratio: openssl_bytes_per_s.map(|o| bytes_per_s / o),
        implementation,
    }
}

impl CryptoReport {
    /// A table for a terminal.
    pub fn to_text(&self) -> String {
        let mut out = format!(
            "per-core throughput on 4096-byte units, CPU {} ({} round(s) of {:.1} s CPU time, median){}\n\n",
            self.cpu,
            self.rounds,
            self.seconds,
            self.openssl
                .as_ref()
                .map_or(", openssl not found".to_string(), |v| format!(", vs {v}")),
        );
        out.push_str(&format!(
            "{:<18}{:>12}{:>11}{:>12}{:>8}  {}\n",
            "", "readpath", "per unit", "openssl", "ratio", "implementation"
        ));
        let gb = |v: f64| format!("{:.2} GB/s", v / 1e9);
        // The time one 4096-byte unit takes: what a work item pays, and
        // the figure to hold against a kernel trace's execution time.
        let per_unit = |v: f64| {
            let us = 4096.0 / v * 1e6;
            if !us.is_finite() {
                "-".to_string()
            } else if us < 10.0 {
                format!("{us:.2} us")
            } else {
                format!("{us:.0} us")
            }
        };
        for r in &self.results {
            out.push_str(&format!(
                "{:<18}{:>12}{:>11}{:>12}{:>8}  {}\n",
                r.name,
                gb(r.bytes_per_s),
                per_unit(r.bytes_per_s),
                r.openssl_bytes_per_s.map_or("-".into(), gb),
                r.ratio.map_or("-".into(), |x| format!("{x:.2}x")),
                r.implementation
            ));
        }
        if !self.afalg.is_empty() {
            out.push_str(&format!(
                "\nthe same work by the running kernel through AF_ALG (one thread, wall time per operation, median):\n{:<22}{:>12}{:>12}{:>8}{:>14}  {}\n",
                "", "readpath", "AF_ALG", "ratio", "per call", "implementation"
            ));
            let us = |ns: f64| format!("{:.2} us", ns / 1e3);
            for r in &self.afalg {
                out.push_str(&format!(
                    "{:<22}{:>12}{:>12}{:>8}{:>14}  {}\n",
                    r.name,
                    us(r.software_ns),
                    us(r.afalg_ns),
                    format!("{:.2}x", r.ratio),
                    format!("{:+.0} ns", r.overhead_per_call_ns),
                    r.implementation
                ));
            }
        }
        if let Some(why) = &self.afalg_missing {
            out.push_str(&format!("\nAF_ALG: not measured: {why}\n"));
        }
        out.push_str(
            "\nsha256-2x: two blocks hashed together, interleaved (fs-verity does this since Linux 6.18), against openssl's one-stream sha256.\nfsverity-verify: cached block checks in pairs, as the pipeline does them (hash the blocks, compare with their verified leaves), against openssl sha256.\nkernel-copy: not crypto: the page-cache readers' copy to the application (a 128 KiB pread of the cache's memfd), which every miss also makes.\n",
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_openssl_speed_output() {
        let text = "version: 3.0.22\nbuilt on: ...\nThe 'numbers' are in 1000s of bytes per second processed.\ntype           4096 bytes\nAES-256-XTS    5412345.67k\n";
        assert_eq!(parse_openssl_speed(text), Some(5_412_345_670.0));
        assert_eq!(parse_openssl_speed("nothing here"), None);
    }

    #[test]
    fn measures_something() {
        let v = measure(0.01, |i| {
            std::hint::black_box(i);
        });
        assert!(v > 0.0);
    }

    #[test]
    fn afalg_rows_are_ratios_and_per_call_overheads() {
        let r = afalg_row(
            "xts decrypt 128K bio",
            32,
            vec![9_000.0, 10_000.0, 11_000.0],
            vec![40_000.0, 42_000.0, 99_000.0],
            "aes-ni vs xts-aes-vaes-avx512",
        );
        assert_eq!(r.software_ns, 10_000.0);
        assert_eq!(r.afalg_ns, 42_000.0);
        assert_eq!(r.ratio, 4.2);
        assert_eq!(r.overhead_per_call_ns, 1_000.0);
        let rep = CryptoReport {
            results: Vec::new(),
            seconds: 1.0,
            rounds: 3,
            cpu: 0,
            openssl: None,
            afalg: vec![r],
            afalg_missing: None,
        };
        let text = rep.to_text();
        assert!(
            text.contains("xts decrypt 128K bio      10.00 us    42.00 us   4.20x      +1000 ns  aes-ni vs xts-aes-vaes-avx512"),
            "{text}"
        );
        let missing = CryptoReport {
            afalg: Vec::new(),
            afalg_missing: Some("no AF_ALG".into()),
            ..rep
        };
        assert!(
            missing
                .to_text()
                .contains("AF_ALG: not measured: no AF_ALG")
        );
        // Each primitive's time per 4096-byte unit beside its throughput:
        // 38.1 MB/s is 107 us a unit, 7 GB/s 0.59 us.
        let units = CryptoReport {
            results: [("aes-256-xts-ti", 38.1e6), ("aes-256-xts", 7.0e9)]
                .into_iter()
                .map(|(name, b)| CryptoResult {
                    name: name.into(),
                    bytes_per_s: b,
                    openssl_bytes_per_s: None,
                    ratio: None,
                    implementation: "x".into(),
                })
                .collect(),
            afalg: Vec::new(),
            afalg_missing: None,
            ..missing
        }
        .to_text();
        assert!(
            units.contains("aes-256-xts-ti       0.04 GB/s     108 us"),
            "{units}"
        );
        assert!(
            units.contains("aes-256-xts          7.00 GB/s    0.59 us"),
            "{units}"
        );
        // A report from an older readpath (no AF_ALG fields) still reads.
        let json = r#"{"results":[],"seconds":1.0,"rounds":1,"cpu":0,"openssl":null}"#;
        let old: CryptoReport = serde_json::from_str(json).unwrap();
        assert!(old.afalg.is_empty() && old.afalg_missing.is_none());
    }

    /// Where AF_ALG works, the rows are measured; where it does not, the
    /// report says why.
    #[test]
    fn afalg_rows_measure_or_say_why_not() {
        let (rows, missing) = afalg_rows(0.004, 1);
        match crate::sys::afalg_probe("skcipher", crate::crypto::KERNEL_XTS) {
            Ok(()) => {
                assert!(rows.iter().any(|r| r.name == "xts decrypt 4K unit"));
                assert!(rows.iter().all(|r| r.software_ns > 0.0 && r.afalg_ns > 0.0));
            }
            Err(why) => {
                assert!(rows.iter().all(|r| !r.name.starts_with("xts")));
                assert!(missing.unwrap().contains(&why.to_string()));
            }
        }
    }
}
