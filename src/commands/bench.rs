//! `readpath bench crypto`: what this machine (or `--remote`'s target, by
//! its own readpath) can do per core with each cipher and SHA-256, next to
//! `openssl speed`.

use std::io::IsTerminal;
use std::time::Duration;

use anyhow::Result;

use crate::cli::{BenchWhat, Format, RemoteArgs};
use crate::invocation::{BadInput, say};

use super::RemoteChoice;
use super::outputs::{emit, say_raw};

/// `readpath bench ...`: measured here, or on the target and printed here.
/// The measurements do not poll for a stop signal: its default action
/// ends them.
pub(super) fn bench(what: BenchWhat, remote: RemoteChoice) -> Result<()> {
    let BenchWhat::Crypto {
        seconds,
        rounds,
        format,
    } = what;
    if let Some((r, ra)) = remote {
        return bench_remote(r, &ra, seconds, rounds, format);
    }
    let tty = std::io::stderr().is_terminal();
    let mut progress = |name: &str| {
        if tty {
            say_raw(&format!("\rmeasuring {name}...          "));
        }
    };
    let r = crate::bench::crypto(seconds.as_secs_f64(), rounds, &mut progress);
    if tty {
        say_raw("\r\x1b[K");
    }
    emit(format, &r, || r.to_text())
}

/// `bench crypto --remote`: the target's own figures (its CPU, its AES and
/// SHA instructions), measured there by its readpath, printed here.
fn bench_remote(
    r: crate::remote::transport::Remote,
    ra: &RemoteArgs,
    seconds: Duration,
    rounds: u32,
    format: Format,
) -> Result<()> {
    let dir = ra
        .remote_dir
        .clone()
        .unwrap_or_else(|| r.default_dir().to_string());
    say(&format!("readpath: {}: checking the target", r.label()));
    let (bin, done) =
        crate::remote::transport::prepare(&r, &dir, ra.remote_refresh).map_err(|e| {
            if e.is_bad_input() {
                anyhow::Error::from(BadInput(e.to_string()))
            } else {
                e.into()
            }
        })?;
    say(&format!("readpath: {done}"));
    say(&format!(
        "readpath: {}: measuring (about {} s)",
        r.label(),
        (seconds.as_secs_f64() * rounds as f64 * 6.0).ceil()
    ));
    let out = r
        .run(&format!(
            "{} bench crypto --seconds {}ms --rounds {rounds} --format json",
            crate::remote::transport::sh_quote(&bin),
            seconds.as_millis()
        ))
        .map_err(|e| anyhow::anyhow!(e))?;
    let report: crate::bench::CryptoReport = serde_json::from_str(&out).map_err(|e| {
        anyhow::anyhow!(
            "{}: the target's bench output is not a readpath report: {e}",
            r.label()
        )
    })?;
    emit(format, &report, || report.to_text())
}
