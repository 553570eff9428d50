//! The bound on the statements a verb holds in memory by design (`rdf validate`'s
//! unordered comparison, `patch diff`, `patch apply`): past it, the verb stops with an
//! error that names the count and the option that raises it, rather than growing until
//! the allocator fails and aborts the process.

use crate::error::{CliError, CliResult};

/// The default of `--max-statements`. A held statement takes a few hundred bytes (a
/// dataset entry of owned terms; measured 360 to 620 bytes for short IRIs and
/// literals): this many, on each side of a comparison or diff, stay within a few GB.
pub const DEFAULT_MAX_HELD_STATEMENTS: u64 = 2_000_000;

/// How many statements a verb may hold (`--max-statements`).
#[derive(Debug, Clone, Copy)]
pub struct HeldLimit {
    /// The most statements held.
    pub max: u64,
}

impl HeldLimit {
    /// The limit `--max-statements` asks for, or the default.
    pub fn new(flag: Option<u64>) -> HeldLimit {
        HeldLimit {
            max: flag.unwrap_or(DEFAULT_MAX_HELD_STATEMENTS),
        }
    }

    /// An error when holding `held` statements would pass the limit; `what` names the
    /// holder (a file, "the dataset") and `why` says why this verb holds statements.
    ///
    /// ```
    /// use jelly_cli::held::HeldLimit;
    /// let l = HeldLimit { max: 2 };
    /// assert!(l.check(2, "a.nq", "diff holds both files").is_ok());
    /// let e = l.check(3, "a.nq", "diff holds both files").unwrap_err();
    /// assert!(e.message.contains("more than 2 statements") && e.message.contains("--max-statements"), "{}", e.message);
    /// ```
    pub fn check(&self, held: u64, what: &str, why: &str) -> CliResult {
        if held <= self.max {
            return Ok(());
        }
        Err(CliError::invalid(format!(
            "{what}: more than {} statements to hold in memory ({why}); \
             raise the limit with --max-statements N if the memory is there",
            self.max
        )))
    }

    /// The error for an allocation that failed while `held` statements were held, so
    /// that running out of memory is told, not an abort.
    pub fn out_of_memory(&self, held: u64, what: &str, why: &str) -> CliError {
        CliError::invalid(format!(
            "{what}: out of memory after holding {held} statements ({why}; \
             --max-statements is {})",
            self.max
        ))
    }
}
