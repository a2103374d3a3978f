//! The dataset: `readpath prepare` makes (or checks and keeps) the one for
//! a file size, and the commands that run a workload make theirs before it
//! starts ([`prepare_dataset`]). Either runs on a thread of its own while
//! this one watches for a stop signal, which removes the partial dataset.

use std::io::{IsTerminal, Write};
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};

use crate::dataset::{DEFAULT_SEED, Dataset, OpenOutcome};
use crate::invocation::{BadInput, say};
use crate::settings::{Settings, parse_size};

use super::Interrupted;
use super::outputs::say_raw;

/// `readpath prepare --size SIZE`: says what it did with the dataset on
/// stdout.
pub(super) fn prepare(data_dir: &Path, size: &str, salt: &str, force: bool) -> Result<()> {
    let file_size = parse_size(size).map_err(|e| BadInput(format!("--size: {e}")))?;
    let mut s = Settings::default();
    s.set(crate::key!(workload.file_size).name(), size)
        .map_err(|e| BadInput(format!("--size: {e}")))?;
    s.set(crate::key!(pipeline.salt).name(), salt)
        .map_err(|e| BadInput(format!("--salt: {e}")))?;
    let salt = s.pipeline.salt.clone();
    let as_cli_error = |e: crate::dataset::DatasetError| -> anyhow::Error {
        if e.is_bad_input() {
            BadInput(e.to_string()).into()
        } else {
            e.into()
        }
    };
    // On a thread of its own: a stop signal ends the command at once.
    let dir = data_dir.to_path_buf();
    let made = interruptibly(data_dir, move || {
        let mut progress = progress_reporter();
        if force {
            Dataset::prepare(&dir, file_size, &salt, DEFAULT_SEED, &mut progress)
                .map(|ds| (ds, OpenOutcome::Created))
        } else {
            Dataset::open_or_prepare(&dir, file_size, &salt, &mut progress)
        }
    })?;
    let (ds, outcome) = made.map_err(as_cli_error)?;
    let what = match outcome {
        OpenOutcome::Existing => "valid dataset kept".to_string(),
        OpenOutcome::Created => "dataset prepared".to_string(),
        OpenOutcome::Rebuilt(why) => format!("dataset rebuilt ({why})"),
    };
    writeln!(
        std::io::stdout(),
        "{what}: {} ({} bytes, fs-verity digest sha256:{})",
        ds.dir().display(),
        ds.file_size(),
        ds.header().file_digest
    )?;
    Ok(())
}

/// Builds the dataset `settings` read, when it is missing or invalid, on a
/// thread of its own while this one watches for a stop signal: the
/// dataset's writer does not look at signals, and a large dataset takes
/// minutes. On a stop signal the partial dataset is removed and the
/// command ends ([`Interrupted`], exit status 1). Settings that
/// [`Engine::start`] refuses before touching the dataset are left to it,
/// so a refusal still comes before anything is written; so is a dataset
/// that cannot be made (Engine::start says why).
///
/// [`Engine::start`]: crate::engine::Engine::start
pub(super) fn prepare_dataset(data_dir: &Path, settings: &Settings) -> Result<()> {
    let (size, salt) = (settings.workload.file_size, settings.pipeline.salt.clone());
    if Dataset::open(data_dir, size, &salt).is_ok() {
        return Ok(());
    }
    let early = crate::engine::resolve(
        settings,
        &crate::sys::probe_features(),
        &crate::engine::DataFs::capable(),
    );
    if !early.is_ok_and(|r| crate::engine::memory::check_fits(&r.effective).is_ok()) {
        return Ok(());
    }
    let dir = data_dir.to_path_buf();
    let made = interruptibly(data_dir, move || {
        let mut progress = progress_reporter();
        Dataset::open_or_prepare(&dir, size, &salt, &mut progress)
    })?;
    match made {
        Ok((ds, OpenOutcome::Created)) => {
            say(&format!(
                "readpath: dataset prepared in {}",
                ds.dir().display()
            ));
        }
        Ok((_, OpenOutcome::Rebuilt(why))) => say(&format!("readpath: dataset rebuilt ({why})")),
        _ => {}
    }
    Ok(())
}

/// Runs `work` (writing a dataset under `data_dir`) on a thread while this
/// one polls for a stop signal; on one, removes the dataset directories
/// this process was writing (`.dataset-SIZE.tmp-PID`: the thread ends with
/// the process) and returns [`Interrupted`].
fn interruptibly<T: Send + 'static>(
    data_dir: &Path,
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("dataset".into())
        .spawn(move || {
            let _ = tx.send(work());
        })
        .context("starting the dataset's thread")?;
    loop {
        match rx.recv_timeout(Duration::from_millis(50)) {
            Ok(v) => return Ok(v),
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                anyhow::bail!("preparing the dataset: its thread ended without a result")
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
        }
        if crate::sys::stop_requested() {
            let own = format!(".tmp-{}", std::process::id());
            for e in std::fs::read_dir(data_dir).into_iter().flatten().flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if name.starts_with(".dataset-") && name.ends_with(&own) {
                    let _ = std::fs::remove_dir_all(e.path());
                }
            }
            if std::io::stderr().is_terminal() {
                say_raw("\r\x1b[K");
            }
            return Err(Interrupted(format!(
                "stopped by {} while preparing the dataset in {}: the partial dataset was removed",
                crate::sys::signal_name(crate::sys::stop_signal()),
                data_dir.display()
            ))
            .into());
        }
    }
}

/// A progress reporter for dataset preparation: a bar on a terminal, silence otherwise.
pub(super) fn progress_reporter() -> impl FnMut(u64, u64) {
    let bar: Option<indicatif::ProgressBar> = std::io::stderr().is_terminal().then(|| {
        let b = indicatif::ProgressBar::new(0);
        b.set_style(
            indicatif::ProgressStyle::with_template(
                "preparing dataset [{bar:40}] {bytes}/{total_bytes} ({eta})",
            )
            .expect("static template")
            .progress_chars("=> "),
        );
        b
    });
    move |done, total| {
        if let Some(b) = &bar {
            b.set_length(total);
            b.set_position(done);
            if done >= total {
                b.finish_and_clear();
            }
        }
    }
}
