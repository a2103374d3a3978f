//! Child processes the lab waits on for long (a download, an unpack, a
//! kernel build): each in its own process group, killed whole on a stop
//! signal within 100 ms and with readpath however it ends, its output
//! read line by line for progress and quoted when it fails.

use std::io::{self, BufRead};
use std::process::{Command, Stdio};
use std::time::Duration;

/// Runs `cmd` in its own process group (killed whole on a stop signal
/// within 100 ms, and with readpath however it ends), each line of its
/// output given to `line`; a failure quotes its last lines.
pub fn polled(cmd: &mut Command, what: &str, line: &mut dyn FnMut(&str)) -> io::Result<()> {
    use std::os::unix::process::CommandExt;
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    crate::sys::die_with_parent(cmd);
    let mut child = cmd
        .spawn()
        .map_err(|e| io::Error::new(e.kind(), format!("{what}: {e}")))?;
    let pgid = child.id();
    // Both streams go to one channel read here, so this thread can poll
    // for a stop signal between lines.
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let mut readers = Vec::new();
    let streams: [Option<Box<dyn io::Read + Send>>; 2] = [
        child.stdout.take().map(|o| Box::new(o) as _),
        child.stderr.take().map(|e| Box::new(e) as _),
    ];
    for s in streams.into_iter().flatten() {
        let tx = tx.clone();
        readers.push(std::thread::spawn(move || {
            for l in io::BufReader::new(s).lines().map_while(Result::ok) {
                let _ = tx.send(l);
            }
        }));
    }
    drop(tx);
    let mut tail: std::collections::VecDeque<String> = Default::default();
    loop {
        if crate::sys::stop_requested() {
            // The group is the child's own (process_group(0)), not reaped yet.
            crate::sys::kill_group(pgid);
            let _ = child.wait();
            return Err(io::Error::new(
                io::ErrorKind::Interrupted,
                format!(
                    "stopped by {} ({what} killed)",
                    crate::sys::signal_name(crate::sys::stop_signal())
                ),
            ));
        }
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(l) => {
                line(&l);
                if tail.len() == 20 {
                    tail.pop_front();
                }
                tail.push_back(l);
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    for r in readers {
        let _ = r.join();
    }
    let status = child.wait()?;
    if !status.success() {
        return Err(io::Error::other(format!(
            "{what} failed ({status}); its last lines:\n{}",
            tail.iter()
                .map(|l| crate::sys::printable(l, false))
                .collect::<Vec<_>>()
                .join("\n")
        )));
    }
    Ok(())
}
