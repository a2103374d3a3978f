//! `readpath replay`: a recording played back in the explorer at any
//! speed, with no workload running.

use std::io::IsTerminal;
use std::path::Path;

use anyhow::{Context, Result};

use crate::invocation::BadInput;

use super::outputs::recording_error;

/// `readpath replay FILE`: needs a terminal; refuses an empty recording.
pub(super) fn replay(
    file: &Path,
    speed: f64,
    fps: f64,
    ascii: bool,
    theme: crate::tui::theme::ThemeName,
    present: bool,
    mouse: bool,
) -> Result<()> {
    // A finished sweep: its grid, to walk with the arrows.
    if let Some(sweep) = super::plot::sweep_report(file)? {
        if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
            return Err(BadInput(
                "replay needs a terminal (stdin and stdout are not both one)".into(),
            )
            .into());
        }
        let th = crate::tui::theme::Theme::named(theme);
        let _ = (speed, fps, ascii, present, mouse);
        crate::tui::sweep_view::show(&sweep, &th).context("drawing the sweep")?;
        return Ok(());
    }
    let rec = crate::output::recording::read(file).map_err(recording_error)?;
    if rec.records.is_empty() {
        return Err(BadInput(format!(
            "{}: the recording holds no interval: nothing to replay",
            file.display()
        ))
        .into());
    }
    if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
        return Err(
            BadInput("replay needs a terminal (stdin and stdout are not both one)".into()).into(),
        );
    }
    let mut driver = crate::tui::replay::ReplayDriver::new(rec, speed);
    let mut app = driver.fresh_app();
    let opts = crate::tui::TuiOptions {
        fps,
        ascii,
        theme,
        duration: None,
        preset: None,
        present,
        mouse,
    };
    crate::tui::run_with(&mut driver, &mut app, &opts).context("drawing the replay")?;
    Ok(())
}
