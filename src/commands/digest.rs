//! `readpath digest`: the fs-verity digest of files, as `fsverity digest`
//! prints it (the oracle the tests hold readpath's Merkle tree to).

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result};

use crate::invocation::BadInput;
use crate::verity::merkle::{MerkleParams, digest_reader, format_digest};

/// `readpath digest FILE...`: one line per file; a FIFO's wait for its
/// writer ends on a stop signal.
pub(super) fn digest(block_size: usize, salt: &str, files: &[PathBuf]) -> Result<()> {
    let salt =
        hex::decode(salt).map_err(|e| BadInput(format!("--salt \"{salt}\": not hex ({e})")))?;
    let params = MerkleParams::new(block_size, &salt).map_err(|e| BadInput(e.to_string()))?;
    let mut out = crate::files::stdout();
    for f in files {
        // A FIFO or `<(command)` is read through poll: a stop signal ends
        // the wait for its writer, as it ends the digest of a large file.
        let file = crate::files::open_input(f)
            .map_err(|e| BadInput(format!("{}: {}", f.display(), crate::files::plain(&e))))?;
        if file.is_dir() {
            return Err(BadInput(format!("{}: is a directory, not a file", f.display())).into());
        }
        let d = digest_reader(std::io::BufReader::with_capacity(1 << 20, file), &params)
            .with_context(|| format!("{}", f.display()))?;
        // A file name is text from anywhere (`digest *`): printable.
        let name = crate::output::format::printable(&f.display().to_string(), false);
        writeln!(out, "{} {name}", format_digest(&d))?;
    }
    out.flush()?;
    Ok(())
}
