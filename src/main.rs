//! The `readpath` binary: parses the command line and maps the outcome to an
//! exit status (0 success, 2 bad input, 1 other failure). Everything else
//! lives in the library so tests can reach it.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = readpath::cli::Cli::parse();
    match readpath::cli::main_with_args(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            readpath::cli::say(&format!("readpath: {}", readpath::cli::error_message(&e)));
            if e.downcast_ref::<readpath::cli::BadInput>().is_some() {
                ExitCode::from(2)
            } else {
                ExitCode::from(1)
            }
        }
    }
}
