//! A workload started on another machine (`--remote`), for the commands
//! that run one there (the explorer, `run`, `demo`, `compare --hosts`):
//! what the start sends, and the start itself, said on stderr.

use std::time::Duration;

use anyhow::Result;

use crate::cli::{RemoteArgs, SettingsArgs};
use crate::invocation::{preset_error, say};
use crate::scenario::preset;

use super::engine_error;

/// What a remote start sends: a preset file is read here (its settings go
/// whole), a preset name is resolved on the target, `--set` applies there.
pub(super) fn remote_spec(
    args: &SettingsArgs,
    command: &str,
    interval: Duration,
    ra: &RemoteArgs,
) -> Result<crate::remote::client::StartSpec> {
    let (preset, settings) = match &args.preset {
        Some(p) if p.contains('/') || p.ends_with(".toml") => (
            None,
            Some(preset::resolve(p).map_err(preset_error)?.0.settings),
        ),
        other => (other.clone(), None),
    };
    Ok(crate::remote::client::StartSpec {
        preset,
        settings,
        set: args.set.clone(),
        interval,
        command: command.into(),
        dir: ra.remote_dir.clone(),
        data_dir: ra.remote_data_dir.clone(),
        refresh: ra.remote_refresh,
    })
}

/// Starts the agent on the target, saying on stderr what it does.
pub(super) fn start_remote(
    r: crate::remote::transport::Remote,
    spec: crate::remote::client::StartSpec,
) -> Result<crate::remote::client::RemoteWorkload> {
    crate::sys::install_stop_handlers();
    let mut tell = |m: &str| say(&format!("readpath: {m}"));
    crate::remote::client::RemoteWorkload::start(r, spec, &mut tell).map_err(engine_error)
}
