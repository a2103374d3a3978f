//! The `readpath` binary: parses the command line and maps the outcome to an
//! exit status (0 success, 2 bad input, 1 other failure). Everything else
//! lives in the library so tests can reach it.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = readpath::cli::Cli::parse();
    match readpath::commands::main_with_args(cli) {
        Ok(()) => ExitCode::SUCCESS,
        // The reader of stdout went away (`readpath presets list | head`):
        // nothing more to say, as a tool killed by SIGPIPE says nothing
        // (status 1: the output was not all written).
        Err(e)
            if e.chain().any(|c| {
                c.downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            }) =>
        {
            ExitCode::from(1)
        }
        Err(e) => {
            readpath::invocation::say(&format!(
                "readpath: {}",
                readpath::invocation::error_message(&e)
            ));
            if e.downcast_ref::<readpath::invocation::BadInput>().is_some() {
                ExitCode::from(2)
            } else {
                ExitCode::from(1)
            }
        }
    }
}
