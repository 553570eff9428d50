//! The `jelly` command line. See `jelly --help`.

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;
use clap::error::ErrorKind;
use jelly_cli::cli::Cli;
use jelly_cli::error::{EXIT_OK, EXIT_USAGE};

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
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return ExitCode::from(usage_answer(&e)),
    };
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

/// Prints clap's answer to a command line it did not run (help, version, a usage
/// error) and gives the exit code. Help and version go to stdout: if that write fails
/// (a full disk; a closed pipe is a reader that has seen enough) the exit code says so,
/// where clap's own `exit` would report success.
fn usage_answer(e: &clap::Error) -> u8 {
    let printed = e.print().and_then(|()| std::io::stdout().flush());
    let to_stdout = matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion);
    match printed {
        Err(io) if to_stdout && io.kind() != std::io::ErrorKind::BrokenPipe => {
            let _ = writeln!(std::io::stderr(), "jelly: <stdout>: {io}");
            EXIT_USAGE
        }
        _ => u8::try_from(e.exit_code()).unwrap_or(EXIT_USAGE),
    }
}
