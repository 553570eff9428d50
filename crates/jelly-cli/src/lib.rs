//! Library side of the `jelly` command line: each module is one verb or tool, so the
//! binary stays thin and tests can call the same code.

pub mod cli;
pub mod common;
pub mod conformance;
pub mod conformance_cmd;
pub mod error;
pub mod format;
pub mod from_jelly;
pub mod held;
pub mod inspect;
pub mod interrupt;
pub mod io;
pub mod jelly_text;
pub mod limits;
pub mod namespaces;
pub mod parse_ahead;
pub mod patch;
pub mod publish;
pub mod rdf_check;
pub mod rdf_read;
pub mod rdf_source;
pub mod report;
pub mod serve;
pub mod server_client;
pub mod spool;
pub mod statement_batch;
pub mod stream_body;
pub mod subscribe;
pub mod to_jelly;
pub mod topics;
pub mod transcode;
pub mod validate;

use clap::CommandFactory;

use cli::{Cli, Command, RdfCommand, Shell};
use error::CliResult;

/// Runs a parsed command line.
pub fn run(cli: &Cli) -> CliResult {
    let q = cli.quiet;
    limits::set(&cli.limits);
    match &cli.command {
        Command::Rdf(RdfCommand::ToJelly(a)) => to_jelly::run(a, q),
        Command::Rdf(RdfCommand::FromJelly(a)) => from_jelly::run(a, q),
        Command::Rdf(RdfCommand::Transcode(a)) => transcode::run(a, q),
        Command::Rdf(RdfCommand::Inspect(a)) => inspect::run(a, q),
        Command::Rdf(RdfCommand::Validate(a)) => validate::run(a, q),
        Command::Patch(p) => patch::run(p, q),
        Command::Serve(a) => serve::run(a, q),
        Command::Publish(a) => publish::run(a, q),
        Command::Subscribe(a) => subscribe::run(a, q),
        Command::Topics(a) => topics::run(a, q),
        Command::Conformance(a) => conformance_cmd::run(a, q),
        Command::Version => server_client::print_line(&version_text()),
        Command::Completions { shell } => {
            let mut cmd = Cli::command();
            // Generated into memory: clap_complete panics on a failed write (a closed
            // pipe), and the write is where errors are handled.
            let mut out = Vec::new();
            use clap_complete::Shell as S;
            let s = match shell {
                Shell::Bash => S::Bash,
                Shell::Zsh => S::Zsh,
                Shell::Fish => S::Fish,
                Shell::Elvish => S::Elvish,
                Shell::Powershell => S::PowerShell,
            };
            clap_complete::generate(s, &mut cmd, "jelly", &mut out);
            use std::io::Write;
            let mut stdout = std::io::stdout().lock();
            stdout
                .write_all(&out)
                .and_then(|()| stdout.flush())
                .map_err(|e| error::CliError::io("<stdout>", &e))
        }
    }
}

/// What `jelly version` prints: this build and the protocol versions it reads and writes
/// (as `jelly-cli version` of the JVM tools lists its libraries').
///
/// ```
/// let text = jelly_cli::version_text();
/// assert!(text.starts_with("jelly "));
/// assert!(text.contains("Jelly-RDF"));
/// ```
pub fn version_text() -> String {
    format!(
        "jelly {}\n\
         Jelly-RDF: spec 1.1; reads protocol versions {} to {}, writes {} (or {} for a \
         stream with namespace declarations)\n\
         Jelly-Patch: protocol version {} (beta)\n\
         gRPC: {}",
        env!("CARGO_PKG_VERSION"),
        jelly::options::VERSION_1_0,
        jelly::options::MAX_SUPPORTED_VERSION,
        jelly::options::VERSION_1_0,
        jelly::options::VERSION_1_1,
        jelly::patch::PATCH_VERSION,
        jelly_server::grpc::service::SERVICE_NAME,
    )
}
