//! How much slower a lab guest is than the machine it runs on, measured
//! (`readpath lab bench`) and kept beside the lab's kernels, so every
//! place that shows a guest's times can say by how much emulation
//! stretches them. Under TCG the guest's CPU is emulated: its crypto is
//! many times slower than the host's, its device a little; the kernel's
//! scheduling and workqueue logic run for real.

use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::bench::CryptoReport;
use crate::sys::trust;

use super::VmRemote;

/// One figure here and in the guest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// What (`aes-256-xts`, `sha256`, `cold 4K read p50`).
    pub what: String,
    /// Its unit (`us per 4 KiB`).
    pub unit: String,
    /// Here.
    pub host: f64,
    /// In the guest.
    pub guest: f64,
}

impl Row {
    /// guest / host: how many times slower the guest is.
    pub fn factor(&self) -> f64 {
        self.guest / self.host
    }
}

/// `lab bench`'s result for one guest kernel and accelerator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Slowdown {
    /// The guest (`vm:6.1`).
    pub guest: String,
    /// Its kernel's name in the lab.
    #[serde(default)]
    pub kernel: String,
    /// Its accelerator (`tcg`, `kvm`).
    pub accel: String,
    /// Its vCPUs.
    pub cpus: u32,
    /// When it was measured (UTC, RFC 3339).
    pub measured: String,
    /// Each figure.
    pub rows: Vec<Row>,
}

/// The crypto figures compared: per 4 KiB unit on one core.
const CRYPTO: &[&str] = &[
    "aes-256-xts",
    "aes-256-xts-soft",
    "sha256",
    "fsverity-verify",
];

impl Slowdown {
    /// From both sides' `bench crypto` and the cold read's p50 (us).
    pub fn of(
        vm: &VmRemote,
        host: &CryptoReport,
        guest: &CryptoReport,
        host_read_us: f64,
        guest_read_us: f64,
    ) -> Slowdown {
        let per_unit = |r: &CryptoReport, name: &str| {
            r.results
                .iter()
                .find(|x| x.name == name)
                .map(|x| 4096.0 / x.bytes_per_s * 1e6)
        };
        let mut rows: Vec<Row> = CRYPTO
            .iter()
            .filter_map(|n| {
                Some(Row {
                    what: n.to_string(),
                    unit: "us per 4 KiB".into(),
                    host: per_unit(host, n)?,
                    guest: per_unit(guest, n)?,
                })
            })
            .collect();
        rows.push(Row {
            what: "cold 4K read p50".into(),
            unit: "us".into(),
            host: host_read_us,
            guest: guest_read_us,
        });
        Slowdown {
            guest: vm.label(),
            kernel: vm.kernel.clone(),
            accel: vm.accel_name().into(),
            cpus: vm.cpus,
            measured: crate::output::format::utc_now_rfc3339(),
            rows,
        }
    }

    /// Where the lab keeps it: one file per kernel and accelerator.
    pub fn path(data: &Path, kernel: &str, accel: &str) -> PathBuf {
        super::kernels::lab_dir(data).join(format!("slowdown-{kernel}-{accel}.toml"))
    }

    /// Kept in the lab (a state file: the user's, written anew).
    pub fn save(&self, data: &Path) -> io::Result<PathBuf> {
        let p = Self::path(data, &self.kernel, &self.accel);
        trust::ensure_dir(&super::kernels::lab_dir(data))?;
        trust::write_state(
            &p,
            toml::to_string(self).map_err(io::Error::other)?.as_bytes(),
        )?;
        Ok(p)
    }

    /// What the lab kept for `kernel` under `accel`, if it measured it.
    pub fn load(data: &Path, kernel: &str, accel: &str) -> Option<Slowdown> {
        let text =
            trust::read_state_text(&Self::path(data, kernel, accel), trust::STATE_CAP).ok()??;
        toml::from_str(&text).ok()
    }

    /// In a few words, for a header: `crypto 12x, cold read 2.1x slower
    /// than the host`.
    pub fn short(&self) -> String {
        let f = |what: &str| self.rows.iter().find(|r| r.what == what).map(Row::factor);
        let mut parts = Vec::new();
        if let Some(x) = f("aes-256-xts") {
            parts.push(format!("aes-xts {}", times(x)));
        }
        if let Some(x) = f("cold 4K read p50") {
            parts.push(format!("cold read {}", times(x)));
        }
        format!("{} slower than the host", parts.join(", "))
    }

    /// The table.
    pub fn to_text(&self) -> String {
        let mut out = format!(
            "{} ({}, {} vCPUs) against this machine, measured {}:\n",
            self.guest, self.accel, self.cpus, self.measured
        );
        out.push_str(&format!(
            "  {:<20} {:>12} {:>12} {:>9}  unit\n",
            "", "here", "guest", "slower"
        ));
        for r in &self.rows {
            out.push_str(&format!(
                "  {:<20} {:>12.2} {:>12.2} {:>9}  {}\n",
                r.what,
                r.host,
                r.guest,
                times(r.factor()),
                r.unit
            ));
        }
        if self.accel == "tcg" {
            out.push_str("Under TCG the guest's instructions are emulated: every time it measures is stretched by about these factors, not uniformly; its kernel's scheduling and workqueue decisions run for real.\n");
        }
        out
    }
}

/// `12x`, `2.1x`.
fn times(x: f64) -> String {
    if !x.is_finite() {
        "-".into()
    } else if x >= 10.0 {
        format!("{x:.0}x")
    } else {
        format!("{x:.1}x")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(aes: f64, sha: f64) -> CryptoReport {
        let r = |name: &str, bytes_per_s| crate::bench::CryptoResult {
            name: name.into(),
            bytes_per_s,
            openssl_bytes_per_s: None,
            ratio: None,
            implementation: String::new(),
        };
        CryptoReport {
            results: vec![r("aes-256-xts", aes), r("sha256", sha)],
            seconds: 1.0,
            rounds: 1,
            cpu: 0,
            openssl: None,
            afalg: Vec::new(),
            afalg_missing: None,
        }
    }

    #[test]
    fn the_factors_are_per_unit_times_and_are_kept_and_read_back() {
        let vm = VmRemote::parse_spec("6.1:accel=tcg", None).unwrap();
        // 4096 B at 4.096 GB/s: 1 us a unit here; 12 us in the guest.
        let s = Slowdown::of(
            &vm,
            &report(4.096e9, 2.048e9),
            &report(0.341_333e9, 0.2048e9),
            50.0,
            105.0,
        );
        assert_eq!(s.rows.len(), 3, "{s:?}");
        assert!((s.rows[0].host - 1.0).abs() < 1e-9);
        assert!((s.rows[0].factor() - 12.0).abs() < 0.01);
        assert!((s.rows[1].factor() - 10.0).abs() < 1e-9);
        assert_eq!(
            s.short(),
            "aes-xts 12x, cold read 2.1x slower than the host"
        );
        let t = s.to_text();
        assert!(
            t.contains("cold 4K read p50") && t.contains("emulated"),
            "{t}"
        );
        let data = tempfile::tempdir().unwrap();
        let p = s.save(data.path()).unwrap();
        assert!(p.ends_with("lab/slowdown-6.1-tcg.toml"), "{}", p.display());
        assert_eq!(Slowdown::load(data.path(), "6.1", "tcg"), Some(s));
        assert_eq!(Slowdown::load(data.path(), "6.1", "kvm"), None);
    }
}
