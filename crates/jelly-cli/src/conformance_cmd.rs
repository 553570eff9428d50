//! `jelly conformance`: run the official suite and write an EARL report.

use std::fs;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::cli::ConformanceArgs;
use crate::conformance::{Kind, Outcome, earl_report, run_suite};
use crate::error::{CliError, CliResult};

/// Formats seconds since the Unix epoch as an RFC 3339 UTC timestamp.
///
/// ```
/// assert_eq!(jelly_cli::conformance_cmd::rfc3339(0), "1970-01-01T00:00:00Z");
/// assert_eq!(jelly_cli::conformance_cmd::rfc3339(951_782_400), "2000-02-29T00:00:00Z");
/// ```
pub fn rfc3339(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// Runs the command.
pub fn run(args: &ConformanceArgs, quiet: bool) -> CliResult {
    let suite = Path::new(&args.suite);
    if !suite.join("rdf").is_dir() {
        return Err(CliError::usage(format!(
            "{}: not a conformance suite folder (no rdf/ inside)",
            suite.display()
        )));
    }
    if let Some(d) = &args.out_dir {
        fs::create_dir_all(d).map_err(|e| CliError::io(d, &e))?;
    }
    let results = run_suite(suite, args.out_dir.as_deref().map(Path::new))
        .map_err(|e| CliError::usage(format!("{}: {e}", suite.display())))?;
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    if let Some(earl) = &args.earl {
        if let Some(dir) = Path::new(earl).parent()
            && !dir.as_os_str().is_empty()
        {
            fs::create_dir_all(dir).map_err(|e| CliError::io(earl, &e))?;
        }
        fs::write(earl, earl_report(&results, &rfc3339(secs)))
            .map_err(|e| CliError::io(earl, &e))?;
    }
    let count = |k: Kind| {
        let all = results.iter().filter(|r| r.case.kind == k);
        let total = all.clone().count();
        let passed = all.filter(|r| matches!(r.outcome, Outcome::Passed)).count();
        (passed, total)
    };
    let (fp, ft) = count(Kind::FromJelly);
    let (tp, tt) = count(Kind::ToJelly);
    if !quiet {
        for r in &results {
            if let Outcome::Failed(why) = &r.outcome {
                eprintln!("FAILED {}: {why}", r.case.iri);
            }
        }
    }
    println!("from_jelly: {fp}/{ft} passed, to_jelly: {tp}/{tt} passed");
    if fp != ft || tp != tt {
        return Err(CliError::invalid(format!(
            "{} conformance case(s) failed",
            (ft - fp) + (tt - tp)
        )));
    }
    Ok(())
}
