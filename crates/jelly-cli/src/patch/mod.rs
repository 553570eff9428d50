//! `jelly patch …`: RDF Patch text and Jelly-Patch streams.

pub mod apply;
pub mod args;
pub mod common;
pub mod diff;
pub mod from_jelly;
pub mod inspect;
pub mod rdf;
pub mod to_jelly;
pub mod validate;

use args::PatchCommand;

use crate::error::CliResult;

/// Runs a `jelly patch` command.
pub fn run(cmd: &PatchCommand, quiet: bool) -> CliResult {
    match cmd {
        PatchCommand::ToJelly(a) => to_jelly::run(a, quiet),
        PatchCommand::FromJelly(a) => from_jelly::run(a, quiet),
        PatchCommand::Inspect(a) => inspect::run(a, quiet),
        PatchCommand::Validate(a) => validate::run(a, quiet),
        PatchCommand::Diff(a) => diff::run(a, quiet),
        PatchCommand::Apply(a) => apply::run(a, quiet),
    }
}
