//! The `jelly` command line. See `jelly --help`.

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;
use jelly_cli::cli::Cli;
use jelly_cli::error::EXIT_OK;

fn main() -> ExitCode {
    // A bug must not print a Rust panic message and backtrace at the user: say what
    // happened in one line and exit with the "invalid" code.
    std::panic::set_hook(Box::new(|info| {
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_default();
        // Where it happened, so that a report can be acted on.
        let at = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        let _ = writeln!(
            std::io::stderr(),
            "jelly: internal error: {msg}{at} (please report this)"
        );
    }));
    let cli = Cli::parse();
    let code = match std::panic::catch_unwind(|| jelly_cli::run(&cli)) {
        Ok(Ok(())) => EXIT_OK,
        Ok(Err(e)) if e.broken_pipe => EXIT_OK,
        Ok(Err(e)) => {
            let _ = writeln!(std::io::stderr(), "jelly: {e}");
            e.code
        }
        Err(_) => 1,
    };
    ExitCode::from(code)
}
