//! `readpath agent`: the far end of `--remote`. The agent reads commands
//! as JSON lines on stdin and writes the recording format on stdout (see
//! [`crate::remote::agent`]); its status is readpath's exit status.

use std::path::Path;

use anyhow::Result;

/// Runs the agent until its stdin closes, then exits with its status.
pub(super) fn agent(data_dir: &Path) -> Result<()> {
    let status = crate::remote::agent::run(data_dir);
    std::process::exit(status);
}
