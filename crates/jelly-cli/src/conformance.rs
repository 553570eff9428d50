//! Runner for the official Jelly-RDF conformance suite, with EARL output.
//!
//! The suite (`jelly-protobuf/test/rdf`) has two manifests:
//! - `from_jelly`: decode `in.jelly`; a positive case must give one dataset per frame,
//!   isomorphic to `out_NNN.nt|nq` in order; a negative case must fail.
//! - `to_jelly`: encode `in_NNN.nt|nq` (one frame each) with the options in
//!   `stream_options.jelly`; the output must carry exactly those options and decode,
//!   frame by frame, to the same datasets as `out.jelly`. A negative case must be refused.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

use jelly::iso::OrderedIso;
use jelly::{Delimiting, Encoder, JellyReader, Statement, StreamOptions};
use jelly_proto::fields::{frame, row};
use jelly_proto::wire::{Reader, WireType};
use oxrdf::{NamedOrBlankNode, Term as OxTerm};
use oxttl::TurtleParser;

const MF: &str = "http://www.w3.org/2001/sw/DataAccess/tests/test-manifest#";
const JT: &str = "https://w3id.org/jelly/dev/tests/vocab#";
const RDF: &str = "http://www.w3.org/1999/02/22-rdf-syntax-ns#";

/// Direction of a test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    FromJelly,
    ToJelly,
}

/// One test case of a manifest.
#[derive(Debug, Clone)]
pub struct Case {
    /// Test IRI, e.g. `https://w3id.org/jelly/dev/tests/rdf/from_jelly/triples_rdf_1_1/pos_001`.
    pub iri: String,
    /// `<category>/<case>`, e.g. `triples_rdf_1_1/pos_001`.
    pub id: String,
    pub kind: Kind,
    pub positive: bool,
    pub name: String,
    /// Local files of `mf:action` (one for from_jelly, options + inputs for to_jelly).
    pub action: Vec<PathBuf>,
    /// Local files of `mf:result`.
    pub result: Vec<PathBuf>,
}

/// Outcome of one case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Passed,
    Failed(String),
}

/// A case with its outcome.
#[derive(Debug, Clone)]
pub struct CaseResult {
    pub case: Case,
    pub outcome: Outcome,
}

/// Why the suite could not be run at all.
#[derive(Debug, thiserror::Error)]
pub enum SuiteError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Manifest { path: PathBuf, message: String },
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> SuiteError + '_ {
    move |source| SuiteError::Io {
        path: path.to_owned(),
        source,
    }
}

/// Reads the cases of one manifest (`<suite>/rdf/<from_jelly|to_jelly>/manifest.ttl`).
pub fn read_manifest(path: &Path, kind: Kind) -> Result<Vec<Case>, SuiteError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let text = fs::read(path).map_err(io_err(path))?;
    let merr = |message: String| SuiteError::Manifest {
        path: path.to_owned(),
        message,
    };
    let mut props: HashMap<String, Vec<(String, OxTerm)>> = HashMap::new();
    let mut base = String::new();
    for t in TurtleParser::new().for_slice(&text) {
        let t = t.map_err(|e| merr(e.to_string()))?;
        let s = match t.subject {
            NamedOrBlankNode::NamedNode(n) => n.into_string(),
            NamedOrBlankNode::BlankNode(b) => format!("_:{}", b.as_str()),
        };
        if t.predicate.as_str() == format!("{MF}entries") && s.ends_with("/manifest") {
            base = s.trim_end_matches("manifest").to_owned();
        }
        props
            .entry(s)
            .or_default()
            .push((t.predicate.into_string(), t.object));
    }
    let get = |s: &str, p: &str| -> Vec<OxTerm> {
        props
            .get(s)
            .map(|v| {
                v.iter()
                    .filter(|(k, _)| k == p)
                    .map(|(_, o)| o.clone())
                    .collect()
            })
            .unwrap_or_default()
    };
    let key = |t: &OxTerm| match t {
        OxTerm::NamedNode(n) => n.as_str().to_owned(),
        OxTerm::BlankNode(b) => format!("_:{}", b.as_str()),
        other => other.to_string(),
    };
    let list = |head: &OxTerm| -> Vec<OxTerm> {
        let mut out = Vec::new();
        let mut cur = head.clone();
        let nil = format!("{RDF}nil");
        while key(&cur) != nil {
            let Some(first) = get(&key(&cur), &format!("{RDF}first")).into_iter().next() else {
                // Not a list: a single resource.
                if out.is_empty() {
                    out.push(cur.clone());
                }
                break;
            };
            out.push(first);
            match get(&key(&cur), &format!("{RDF}rest")).into_iter().next() {
                Some(r) => cur = r,
                None => break,
            }
        }
        out
    };
    let manifest = format!("{base}manifest");
    let entries = get(&manifest, &format!("{MF}entries"));
    let head = entries
        .first()
        .ok_or_else(|| merr("no mf:entries".into()))?;
    let local = |t: &OxTerm| -> PathBuf {
        let iri = key(t);
        dir.join(iri.strip_prefix(&base).unwrap_or(&iri))
    };
    let mut cases = Vec::new();
    for e in list(head) {
        let iri = key(&e);
        let types: Vec<String> = get(&iri, &format!("{RDF}type")).iter().map(key).collect();
        let positive = types.iter().any(|t| t == &format!("{JT}TestPositive"));
        let name = match get(&iri, &format!("{MF}name")).first() {
            Some(OxTerm::Literal(l)) => l.value().to_owned(),
            _ => String::new(),
        };
        let action = get(&iri, &format!("{MF}action"))
            .first()
            .map(|h| list(h).iter().map(local).collect())
            .unwrap_or_default();
        let result = get(&iri, &format!("{MF}result"))
            .first()
            .map(|h| list(h).iter().map(local).collect())
            .unwrap_or_default();
        let id = iri.strip_prefix(&base).unwrap_or(&iri).to_owned();
        cases.push(Case {
            iri,
            id,
            kind,
            positive,
            name,
            action,
            result,
        });
    }
    Ok(cases)
}

/// Reads the `RdfStreamOptions` of the first row of the first frame of a delimited
/// stream, without validating them (negative cases carry invalid options on purpose).
pub fn read_raw_options(bytes: &[u8]) -> Result<StreamOptions, String> {
    let mut outer = Reader::new(bytes);
    let frame_len = outer.varint().map_err(|e| e.to_string())?;
    let _ = frame_len;
    let mut fr = Reader::new(bytes);
    let frame_bytes = fr.bytes().map_err(|e| e.to_string())?;
    let mut f = Reader::new(frame_bytes);
    while let Some((field, wt)) = f.tag().map_err(|e| e.to_string())? {
        if field == frame::ROWS && wt == WireType::Len {
            let mut r = f.message().map_err(|e| e.to_string())?;
            while let Some((rf, wt)) = r.tag().map_err(|e| e.to_string())? {
                if rf == row::OPTIONS && wt == WireType::Len {
                    return StreamOptions::decode_from(r.message().map_err(|e| e.to_string())?)
                        .map_err(|e| e.to_string());
                }
                r.skip(wt).map_err(|e| e.to_string())?;
            }
        } else {
            f.skip(wt).map_err(|e| e.to_string())?;
        }
    }
    Err("no options row".into())
}

fn read_rdf(path: &Path) -> Result<Vec<Statement>, String> {
    let text = fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    jelly::nquads::parse_document(&text).map_err(|e| format!("{}: {e}", path.display()))
}

fn decode_frames(bytes: &[u8]) -> Result<Vec<Vec<Statement>>, String> {
    JellyReader::new(bytes)
        .read_all_frames()
        .map_err(|e| e.to_string())
}

/// Compares decoded frames with the expected ones as the suite defines: frame by
/// frame, by ordered RDF dataset isomorphism, with one blank node pool for the whole
/// stream.
fn compare_frames(got: &[Vec<Statement>], want: &[Vec<Statement>]) -> Result<(), String> {
    if got.len() != want.len() {
        return Err(format!(
            "{} frames decoded, {} expected",
            got.len(),
            want.len()
        ));
    }
    let mut iso = OrderedIso::default();
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        iso.compare(g, w)
            .map_err(|why| format!("frame {i}: {why}"))?;
    }
    Ok(())
}

fn run_from_jelly(case: &Case) -> Outcome {
    let Some(input) = case.action.first() else {
        return Outcome::Failed("no action file".into());
    };
    let bytes = match fs::read(input) {
        Ok(b) => b,
        Err(e) => return Outcome::Failed(format!("{}: {e}", input.display())),
    };
    let decoded = decode_frames(&bytes);
    if !case.positive {
        return match decoded {
            Err(_) => Outcome::Passed,
            Ok(f) => Outcome::Failed(format!(
                "negative case decoded without error ({} frames)",
                f.len()
            )),
        };
    }
    let got = match decoded {
        Ok(f) => f,
        Err(e) => return Outcome::Failed(e),
    };
    let want: Result<Vec<_>, _> = case.result.iter().map(|p| read_rdf(p)).collect();
    match want.and_then(|w| compare_frames(&got, &w)) {
        Ok(()) => Outcome::Passed,
        Err(e) => Outcome::Failed(e),
    }
}

/// Encodes the inputs of a to_jelly case, one frame per input file.
pub fn encode_case(options: StreamOptions, inputs: &[PathBuf]) -> Result<Vec<u8>, String> {
    let mut enc = Encoder::new(options).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for input in inputs {
        for st in read_rdf(input)? {
            enc.add(st.as_ref())
                .map_err(|e| format!("{}: {e}", input.display()))?;
        }
        if enc.graph_open() {
            enc.end_graph().map_err(|e| e.to_string())?;
        }
        enc.finish_frame_into(&mut out, true);
    }
    Ok(out)
}

fn run_to_jelly(case: &Case, out_dir: Option<&Path>) -> Outcome {
    let Some((opts_file, inputs)) = case.action.split_first() else {
        return Outcome::Failed("no action files".into());
    };
    let opts = match fs::read(opts_file)
        .map_err(|e| e.to_string())
        .and_then(|b| read_raw_options(&b))
    {
        Ok(o) => o,
        Err(e) => return Outcome::Failed(format!("{}: {e}", opts_file.display())),
    };
    let written = encode_case(opts.clone(), inputs);
    if !case.positive {
        return match written {
            Err(_) => Outcome::Passed,
            Ok(_) => Outcome::Failed("negative case was encoded without error".into()),
        };
    }
    let bytes = match written {
        Ok(b) => b,
        Err(e) => return Outcome::Failed(e),
    };
    if let Some(dir) = out_dir {
        let path = dir.join(&case.id).join("out.jelly");
        let saved = path
            .parent()
            .map_or(Ok(()), fs::create_dir_all)
            .and_then(|_| fs::write(&path, &bytes));
        if let Err(e) = saved {
            return Outcome::Failed(format!("{}: {e}", path.display()));
        }
    }
    // The written options must equal the requested ones exactly.
    match read_raw_options(&bytes) {
        Ok(o) if o == opts => {}
        Ok(o) => {
            return Outcome::Failed(format!(
                "written options {o:?} differ from requested {opts:?}"
            ));
        }
        Err(e) => return Outcome::Failed(e),
    }
    let got = match decode_frames(&bytes) {
        Ok(f) => f,
        Err(e) => return Outcome::Failed(format!("our output does not decode: {e}")),
    };
    let want = match case
        .result
        .first()
        .map(|p| fs::read(p).map_err(|e| e.to_string()))
    {
        Some(Ok(b)) => match decode_frames(&b) {
            Ok(f) => f,
            Err(e) => return Outcome::Failed(format!("expected out.jelly does not decode: {e}")),
        },
        Some(Err(e)) => return Outcome::Failed(e),
        None => return Outcome::Failed("no result file".into()),
    };
    match compare_frames(&got, &want) {
        Ok(()) => Outcome::Passed,
        Err(e) => Outcome::Failed(e),
    }
}

/// Runs every case of the suite rooted at `suite` (the folder holding `rdf/`).
/// `out_dir`, if given, receives every to_jelly output as `<category>/<case>/out.jelly`.
pub fn run_suite(suite: &Path, out_dir: Option<&Path>) -> Result<Vec<CaseResult>, SuiteError> {
    let mut results = Vec::new();
    for (sub, kind) in [("from_jelly", Kind::FromJelly), ("to_jelly", Kind::ToJelly)] {
        let manifest = suite.join("rdf").join(sub).join("manifest.ttl");
        for case in read_manifest(&manifest, kind)? {
            let outcome = match kind {
                Kind::FromJelly => run_from_jelly(&case),
                Kind::ToJelly => run_to_jelly(&case, out_dir),
            };
            results.push(CaseResult { case, outcome });
        }
    }
    Ok(results)
}

/// Name and version put in the EARL report.
pub const IMPLEMENTATION: &str = "jellyfish";

/// Writes an EARL 1.0 report in Turtle. `date` is an `xsd:dateTime` lexical form.
pub fn earl_report(results: &[CaseResult], date: &str) -> String {
    let version = env!("CARGO_PKG_VERSION");
    let mut s = String::new();
    s.push_str(
        "@prefix earl: <http://www.w3.org/ns/earl#> .\n\
         @prefix doap: <http://usefulinc.com/ns/doap#> .\n\
         @prefix foaf: <http://xmlns.com/foaf/0.1/> .\n\
         @prefix dc: <http://purl.org/dc/terms/> .\n\
         @prefix xsd: <http://www.w3.org/2001/XMLSchema#> .\n\n",
    );
    let _ = write!(
        s,
        "<https://github.com/jellyfish-rdf/jellyfish> a doap:Project, earl:TestSubject, earl:Software ;\n    \
         doap:name \"{IMPLEMENTATION}\" ;\n    \
         doap:description \"Rust Jelly-RDF codec and stream server\"@en ;\n    \
         doap:programming-language \"Rust\" ;\n    \
         doap:release [ doap:name \"{IMPLEMENTATION} {version}\" ; doap:revision \"{version}\" ] .\n\n\
         <https://github.com/jellyfish-rdf/jellyfish#team> a foaf:Organization, earl:Assertor ;\n    \
         foaf:name \"jellyfish developers\" .\n\n"
    );
    for r in results {
        let outcome = match r.outcome {
            Outcome::Passed => "earl:passed",
            Outcome::Failed(_) => "earl:failed",
        };
        let _ = write!(
            s,
            "[] a earl:Assertion ;\n    earl:assertedBy <https://github.com/jellyfish-rdf/jellyfish#team> ;\n    \
             earl:subject <https://github.com/jellyfish-rdf/jellyfish> ;\n    earl:test <{}> ;\n    \
             earl:mode earl:automatic ;\n    earl:result [ a earl:TestResult ; earl:outcome {outcome} ; dc:date \"{date}\"^^xsd:dateTime",
            r.case.iri
        );
        if let Outcome::Failed(why) = &r.outcome {
            let _ = write!(
                s,
                " ; dc:description \"{}\"",
                why.replace('\\', "\\\\")
                    .replace('"', "\\\"")
                    .replace('\n', " ")
            );
        }
        s.push_str(" ] .\n\n");
    }
    s
}

/// Decodes a to_jelly output for use outside the runner (keeps the API symmetric).
pub fn decode_file(path: &Path) -> Result<Vec<Vec<Statement>>, String> {
    let bytes = fs::read(path).map_err(|e| e.to_string())?;
    JellyReader::with_options(&bytes[..], Default::default(), Delimiting::Auto)
        .read_all_frames()
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use jelly::Term;

    fn st(s: &str, o: &str) -> Statement {
        let term = |x: &str| match x.strip_prefix("_:") {
            Some(b) => Term::BlankNode(b.into()),
            None => Term::Iri(format!("http://ex.org/{x}")),
        };
        Statement {
            subject: term(s),
            predicate: term("p"),
            object: term(o),
            graph: None,
        }
    }

    /// The suite's judge is ordered isomorphism with one blank node pool: a decoder
    /// that reorders, drops a duplicate or relabels a blank node between frames fails.
    #[test]
    fn frames_are_compared_in_order_with_one_blank_node_pool() {
        let want = vec![
            vec![st("a", "b"), st("a", "b"), st("_:x", "c")],
            vec![st("_:x", "d")],
        ];
        let same = vec![
            vec![st("a", "b"), st("a", "b"), st("_:y", "c")],
            vec![st("_:y", "d")],
        ];
        assert!(compare_frames(&same, &want).is_ok());
        let reordered = vec![
            vec![st("_:y", "c"), st("a", "b"), st("a", "b")],
            vec![st("_:y", "d")],
        ];
        assert!(compare_frames(&reordered, &want).is_err());
        let deduplicated = vec![vec![st("a", "b"), st("_:y", "c")], vec![st("_:y", "d")]];
        assert!(compare_frames(&deduplicated, &want).is_err());
        let relabelled = vec![
            vec![st("a", "b"), st("a", "b"), st("_:y", "c")],
            vec![st("_:z", "d")],
        ];
        let e = compare_frames(&relabelled, &want).unwrap_err();
        assert!(e.starts_with("frame 1: statement 0"), "{e}");
    }
}
