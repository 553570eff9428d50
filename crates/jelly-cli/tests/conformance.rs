//! The official Jelly-RDF conformance suite, judged the way the suite defines.

mod cli_support;

use std::path::PathBuf;

use cli_support::TmpDir;
use jelly_cli::conformance::{Kind, Outcome, run_suite};

fn suite_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/jelly-conformance")
}

#[test]
fn official_suite_passes_completely() {
    let out = tempdir();
    let results = run_suite(&suite_dir(), Some(&out)).expect("suite readable");
    let from = results
        .iter()
        .filter(|r| r.case.kind == Kind::FromJelly)
        .count();
    let to = results
        .iter()
        .filter(|r| r.case.kind == Kind::ToJelly)
        .count();
    assert_eq!((from, to), (110, 77), "case counts of the suite");
    let failed: Vec<String> = results
        .iter()
        .filter_map(|r| match &r.outcome {
            Outcome::Failed(why) => Some(format!(
                "{} {}: {why}",
                if r.case.kind == Kind::FromJelly {
                    "from"
                } else {
                    "to"
                },
                r.case.id
            )),
            Outcome::Passed => None,
        })
        .collect();
    assert!(
        failed.is_empty(),
        "{} failures:\n{}",
        failed.len(),
        failed.join("\n")
    );
    // Every positive to_jelly case left its output for outside checking.
    let positives = results
        .iter()
        .filter(|r| r.case.kind == Kind::ToJelly && r.case.positive)
        .count();
    let written = walk(&out)
        .into_iter()
        .filter(|p| p.ends_with("out.jelly"))
        .count();
    assert_eq!(written, positives);
}

fn tempdir() -> TmpDir {
    TmpDir::new(&format!("jelly-conformance-{}", std::process::id()))
}

fn walk(d: &std::path::Path) -> Vec<PathBuf> {
    let mut v = Vec::new();
    for e in std::fs::read_dir(d).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            v.extend(walk(&p));
        } else {
            v.push(p);
        }
    }
    v
}
