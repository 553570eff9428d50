//! Rebased frames (`jelly::rebase`) mean what the original frames meant, alone and
//! served back to back after any other self-contained frames.
//!
//! Each stream is followed frame by frame. A rebased frame must decode, with a fresh
//! decoder, to exactly the statements its original decodes to in the stream; and all
//! output frames, spliced into one stream (options row only once), must decode to the
//! whole stream's statements. Frames the rebaser refuses are re-encoded with a
//! spliceable encoder, as the server does, and spliced in between.

use std::path::PathBuf;

use jelly::rebase::{Rebased, Rebaser};
use jelly::splice::options_row_len;
use jelly::{
    Decoder, Delimiting, Encoder, EncoderConfig, Event, FramePolicy, FrameReader,
    JellyWriterBuilder, Literal, OwnedLiteralKind, PhysicalType, Statement, StreamOptions, Term,
    Triple,
};
use proptest::prelude::*;

/// Statements of one frame, decoded by `dec`.
fn decode_frame(dec: &mut Decoder, frame: &[u8]) -> Result<Vec<Statement>, String> {
    let mut cur = dec.frame(frame);
    let mut out = Vec::new();
    while let Some(ev) = cur.next_event().map_err(|e| e.to_string())? {
        if let Event::Statement(st) = ev {
            out.push(st.to_owned());
        }
    }
    Ok(out)
}

/// How many frames of a stream were rebased and how many refused.
#[derive(Debug, Default, PartialEq, Eq)]
struct Tally {
    rebased: usize,
    refused: usize,
    /// Why, for each refused frame.
    why: Vec<&'static str>,
    /// The decoder rejected a frame of the input (the check ends there).
    rejected: bool,
}

/// Follows `stream` (delimited or a single frame), checking every output frame.
fn check(stream: &[u8], target: &StreamOptions) -> Result<Tally, String> {
    let mut frames = FrameReader::from_slice(stream, Delimiting::Auto, 64 << 20);
    let mut dec = Decoder::default();
    let mut rebaser = Rebaser::new(target);
    let mut spliced = Decoder::default();
    let mut first_item = true;
    let mut reencoder = Encoder::with_config(
        target.clone(),
        EncoderConfig {
            spliceable: true,
            ..EncoderConfig::default()
        },
    )
    .map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    let mut tally = Tally::default();
    let mut index = 0;
    loop {
        let f = match frames.next_frame() {
            Ok(Some(f)) => f,
            Ok(None) => break,
            Err(_) => {
                tally.rejected = true;
                break;
            }
        };
        let r = rebaser.rebase(f.bytes, &dec, &mut out);
        let Ok(mut want) = decode_frame(&mut dec, f.bytes) else {
            tally.rejected = true;
            break;
        };
        if target.physical_type == PhysicalType::Quads {
            // Triples of a TRIPLES stream go into the default graph.
            for s in &mut want {
                s.graph.get_or_insert(Term::DefaultGraph);
            }
        }
        let item = match r {
            Rebased::Frame { statements } => {
                tally.rebased += 1;
                if statements as usize != want.len() {
                    return Err(format!(
                        "frame {index}: {statements} statements counted, {} decoded",
                        want.len()
                    ));
                }
                let alone = decode_frame(&mut Decoder::default(), &out)
                    .map_err(|e| format!("frame {index} alone: {e}"))?;
                if alone != want {
                    return Err(format!(
                        "frame {index} alone:\n got {alone:?}\nwant {want:?}"
                    ));
                }
                out.clone()
            }
            Rebased::NoStatements => {
                if !want.is_empty() {
                    return Err(format!("frame {index}: statements lost"));
                }
                index += 1;
                continue;
            }
            Rebased::Unsupported(why) => {
                tally.refused += 1;
                tally.why.push(why);
                if want.is_empty() {
                    index += 1;
                    continue;
                }
                reencoder.reset();
                let mut fits = true;
                for s in &want {
                    match reencoder.add(s.as_ref()) {
                        Ok(()) => {}
                        // Written in full (the original repeated some of its terms),
                        // a first statement may need more entries than a small table
                        // holds; the server refuses such an item.
                        Err(jelly::EncodeError::TableTooSmallForRow { .. }) => fits = false,
                        Err(e) => return Err(e.to_string()),
                    }
                }
                if !fits {
                    index += 1;
                    continue;
                }
                reencoder.finish_frame()
            }
        };
        let skip = if first_item {
            0
        } else {
            options_row_len(&item).ok_or("an item without an options row")?
        };
        first_item = false;
        let got = decode_frame(&mut spliced, &item[skip..])
            .map_err(|e| format!("frame {index} spliced: {e}"))?;
        if got != want {
            return Err(format!(
                "frame {index} spliced:\n got {got:?}\nwant {want:?}"
            ));
        }
        index += 1;
    }
    Ok(tally)
}

const IRIS: [&str; 6] = [
    "http://example.org/",
    "http://example.org/v#",
    "https://w3id.org/x/y/",
    "urn:x:",
    "http://ex.org/é/",
    "",
];
const DATATYPES: [&str; 3] = [
    "http://www.w3.org/2001/XMLSchema#integer",
    "http://www.w3.org/2001/XMLSchema#dateTime",
    "http://example.org/dt#t",
];

fn iri() -> impl Strategy<Value = Term> {
    (0..IRIS.len(), 0u32..30).prop_map(|(p, n)| Term::Iri(format!("{}n{n}", IRIS[p])))
}

fn object(typed: bool, star: bool) -> BoxedStrategy<Term> {
    let lit = ("[a-z]{0,4}", 0..4usize).prop_map(move |(lex, k)| {
        let kind = match k {
            0 => OwnedLiteralKind::Simple,
            1 => OwnedLiteralKind::Lang("en".into()),
            _ if typed => OwnedLiteralKind::Typed(DATATYPES[k - 1].into()),
            _ => OwnedLiteralKind::Simple,
        };
        Term::Literal(Literal { lex, kind })
    });
    let bnode = (0u32..5).prop_map(|b| Term::BlankNode(format!("b{b}")));
    if star {
        let quoted = (iri(), iri(), iri()).prop_map(|(s, p, o)| {
            Term::Triple(Box::new(Triple {
                subject: s,
                predicate: p,
                object: o,
            }))
        });
        prop_oneof![3 => iri(), 2 => lit, 1 => bnode, 1 => quoted].boxed()
    } else {
        prop_oneof![3 => iri(), 2 => lit, 1 => bnode].boxed()
    }
}

#[derive(Debug, Clone)]
struct Case {
    opts: StreamOptions,
    rows: usize,
    statements: Vec<Statement>,
    /// Namespace declarations before these statement indexes.
    namespaces: Vec<usize>,
}

fn case() -> impl Strategy<Value = Case> {
    (
        any::<bool>(),
        any::<bool>(),
        8u32..=16,
        prop_oneof![Just(0u32), 1u32..=4],
        0u32..=3,
        1usize..=12,
    )
        .prop_flat_map(|(quads, star, name, prefix, datatype, rows)| {
            let physical = if quads {
                PhysicalType::Quads
            } else {
                PhysicalType::Triples
            };
            let opts = StreamOptions::with_tables(name, prefix, datatype)
                .with_physical_type(physical)
                .with_rdf_star(star);
            let graph = if quads {
                prop_oneof![iri().prop_map(Some), Just(Some(Term::DefaultGraph))].boxed()
            } else {
                Just(None).boxed()
            };
            let st = (iri(), iri(), object(datatype > 0, star), graph, 0u8..4);
            (
                Just(opts),
                Just(rows),
                prop::collection::vec(st, 1..80),
                prop::collection::vec(0usize..80, 0..4),
            )
        })
        .prop_map(|(opts, rows, raw, namespaces)| {
            let mut statements: Vec<Statement> = Vec::new();
            for (s, p, o, g, reuse) in raw {
                // Runs of shared terms, so that frames start with repeated terms.
                let st = match (statements.last(), reuse) {
                    (Some(prev), 0) => Statement {
                        object: o,
                        ..prev.clone()
                    },
                    (Some(prev), 1) => Statement {
                        subject: prev.subject.clone(),
                        predicate: prev.predicate.clone(),
                        object: o,
                        graph: g,
                    },
                    _ => Statement {
                        subject: s,
                        predicate: p,
                        object: o,
                        graph: g,
                    },
                };
                statements.push(st);
            }
            Case {
                opts,
                rows,
                statements,
                namespaces,
            }
        })
}

fn write(c: &Case) -> Vec<u8> {
    let mut out = Vec::new();
    let mut w = JellyWriterBuilder::new(c.opts.clone())
        .frame_policy(FramePolicy::Rows(c.rows))
        .namespace_declarations(true)
        .build(&mut out)
        .unwrap();
    for (i, s) in c.statements.iter().enumerate() {
        if c.namespaces.contains(&i) {
            w.declare_namespace("ex", "http://example.org/").unwrap();
        }
        match w.add(s.as_ref()) {
            // A statement alone needing more prefixes than the table holds: left out.
            Err(jelly::WriteError::Encode(jelly::EncodeError::TableTooSmallForRow { .. })) => {}
            r => r.unwrap(),
        }
    }
    w.finish().unwrap();
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// Into a stream with the publisher's own options.
    #[test]
    fn rebased_frames_mean_what_the_originals_meant(c in case()) {
        let stream = write(&c);
        let tally = check(&stream, &c.opts).map_err(TestCaseError::fail)?;
        // Our encoder's streams are refused only where the first statement of a frame
        // repeats a quoted triple, or an IRI whose entry the frame's first rows gave
        // to another value (small tables evict the repeated term's entries).
        let stale = "the first statement repeats a term that cannot be written out";
        prop_assert!(!tally.rejected && tally.why.iter().all(|w| *w == stale), "{:?}", tally);
    }

    /// Into a stream with larger tables (ids stay valid).
    #[test]
    fn rebased_frames_fit_a_larger_target(c in case()) {
        let stream = write(&c);
        // Version 2: namespace declarations are kept.
        // QUADS: a TRIPLES stream's triples go into the default graph.
        let mut target = StreamOptions::big()
            .with_physical_type(PhysicalType::Quads)
            .with_rdf_star(true);
        target.version = 2;
        let prefix_ok = c.opts.max_prefix_table_size > 0;
        let tally = check(&stream, &target).map_err(TestCaseError::fail)?;
        prop_assert!(!tally.rejected);
        if !prefix_ok {
            // The publisher writes every IRI with the empty prefix, which a target with
            // a prefix table cannot express after other frames: all refused.
            prop_assert_eq!(tally.rebased, 0);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 500, ..ProptestConfig::default() })]

    /// Damaged streams: the rebaser never panics, and whatever the decoder still
    /// accepts is rebased to the same statements.
    #[test]
    fn damaged_streams_rebase_to_what_the_decoder_reads(
        c in case(),
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
    ) {
        let mut stream = write(&c);
        for (at, byte) in flips {
            let i = at.index(stream.len());
            stream[i] = byte;
        }
        check(&stream, &c.opts).map_err(TestCaseError::fail)?;
    }
}

/// Publisher options the target cannot hold: every frame refused, and still spliced
/// correctly once re-encoded.
#[test]
fn frames_of_a_stream_that_does_not_fit_are_refused() {
    let c = Case {
        opts: StreamOptions::with_tables(64, 8, 4)
            .with_physical_type(PhysicalType::Triples)
            .with_rdf_star(true),
        rows: 3,
        statements: (0..20)
            .map(|i| Statement {
                subject: Term::Iri(format!("http://example.org/s{}", i / 3)),
                predicate: Term::Iri("http://example.org/p".into()),
                object: Term::Iri(format!("http://example.org/o{i}")),
                graph: None,
            })
            .collect(),
        namespaces: vec![],
    };
    let stream = write(&c);
    for target in [
        // Smaller name table.
        StreamOptions::with_tables(32, 8, 4).with_physical_type(PhysicalType::Triples),
        // No RDF-star where the publisher allows it.
        StreamOptions::with_tables(64, 8, 4).with_physical_type(PhysicalType::Triples),
    ] {
        let t = check(&stream, &target).unwrap();
        assert_eq!(t.rebased, 0, "{target:?}");
        assert!(t.refused >= 7, "{t:?}");
    }
    let same = check(&stream, &c.opts).unwrap();
    assert!(same.refused == 0 && same.rebased >= 7, "{same:?}");
}

/// Every positive TRIPLES and QUADS stream of the conformance suite (written by other
/// encoders: explicit ids, `prefix_id` 0 on first IRIs, repeats across frames).
#[test]
fn conformance_streams_rebase_to_the_same_statements() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/jelly-conformance/rdf/from_jelly");
    let mut streams = 0;
    let mut tally = Tally::default();
    for group in std::fs::read_dir(&root)
        .expect("the conformance suite")
        .flatten()
    {
        let name = group.file_name().to_string_lossy().into_owned();
        if name.starts_with("graphs") {
            continue;
        }
        for case in std::fs::read_dir(group.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            let case_name = case.file_name().to_string_lossy().into_owned();
            let input = case.path().join("in.jelly");
            if !case_name.starts_with("pos_") || !input.is_file() {
                continue;
            }
            let bytes = std::fs::read(&input).unwrap();
            // The stream's own options, from a decode of its first frame.
            let mut frames = FrameReader::from_slice(&bytes, Delimiting::Auto, 64 << 20);
            let mut dec = Decoder::default();
            while dec.options().is_none() {
                let f = frames.next_frame().unwrap().expect("an options row");
                decode_frame(&mut dec, f.bytes).unwrap();
            }
            let opts = dec.options().unwrap().clone();
            let t = check(&bytes, &opts).unwrap_or_else(|e| panic!("{}: {e}", input.display()));
            streams += 1;
            tally.rebased += t.rebased;
            tally.refused += t.refused;
            tally.why.extend(t.why);
        }
    }
    assert!(streams >= 60, "{streams} streams");
    assert!(
        tally.rebased >= 100 && tally.refused == 0 && !tally.rejected,
        "{tally:?}"
    );
}

/// A rebased frame starts with the same options row as a spliceable encoder's frame
/// for the same target, so the two kinds of frames splice into one stream.
#[test]
fn the_options_row_is_the_encoders() {
    for target in [
        StreamOptions::big().with_physical_type(PhysicalType::Quads),
        StreamOptions::small()
            .with_physical_type(PhysicalType::Triples)
            .with_rdf_star(true),
    ] {
        let c = Case {
            opts: target.clone(),
            rows: 100,
            statements: vec![Statement {
                subject: Term::Iri("http://example.org/s".into()),
                predicate: Term::Iri("http://example.org/p".into()),
                object: Term::BlankNode("b".into()),
                graph: (target.physical_type == PhysicalType::Quads).then_some(Term::DefaultGraph),
            }],
            namespaces: vec![],
        };
        let stream = write(&c);
        let mut frames = FrameReader::from_slice(&stream, Delimiting::Auto, 1 << 20);
        let f = frames.next_frame().unwrap().unwrap();
        let mut out = Vec::new();
        let r = Rebaser::new(&target).rebase(f.bytes, &Decoder::default(), &mut out);
        assert_eq!(r, Rebased::Frame { statements: 1 });
        let mut enc = Encoder::with_config(
            target.clone(),
            EncoderConfig {
                spliceable: true,
                ..EncoderConfig::default()
            },
        )
        .unwrap();
        enc.add(c.statements[0].as_ref()).unwrap();
        let encoded = enc.finish_frame();
        let n = options_row_len(&encoded).unwrap();
        assert_eq!(options_row_len(&out), Some(n));
        assert_eq!(out[..n], encoded[..n]);
    }
}

/// A frame that uses entries its decoder never saw is refused, and leaves nothing
/// behind: after `reset`, the same rebaser writes every frame of a stream byte for
/// byte as a rebaser that never failed.
#[test]
fn a_refused_import_leaves_nothing_behind() {
    let c = Case {
        opts: StreamOptions::with_tables(64, 8, 4).with_physical_type(PhysicalType::Triples),
        rows: 3,
        statements: (0..20)
            .map(|i| Statement {
                subject: Term::Iri(format!("http://example.org/s{}", i / 3)),
                predicate: Term::Iri(format!("http://example.org/v#p{}", i % 2)),
                object: Term::Iri(format!("http://example.org/o{i}")),
                graph: None,
            })
            .collect(),
        namespaces: vec![],
    };
    let stream = write(&c);
    let mut reader = FrameReader::from_slice(&stream, Delimiting::Auto, 1 << 20);
    let mut frames = Vec::new();
    while let Some(f) = reader.next_frame().unwrap() {
        frames.push(f.bytes.to_vec());
    }
    assert!(frames.len() >= 4, "{} frames", frames.len());

    // Every frame, rebased by `rebaser` following a fresh decoder.
    let rebase_all = |rebaser: &mut Rebaser| {
        let mut dec = Decoder::default();
        let mut written = Vec::new();
        for f in &frames {
            let mut out = Vec::new();
            let r = rebaser.rebase(f, &dec, &mut out);
            assert!(matches!(r, Rebased::Frame { .. }), "{r:?}");
            decode_frame(&mut dec, f).unwrap();
            written.push(out);
        }
        written
    };
    let want = rebase_all(&mut Rebaser::new(&c.opts));

    let mut rebaser = Rebaser::new(&c.opts);
    let mut dec = Decoder::default();
    let mut out = Vec::new();
    rebaser.rebase(&frames[0], &dec, &mut out);
    decode_frame(&mut dec, &frames[0]).unwrap();
    // The second frame against a decoder that has not read the first one.
    let r = rebaser.rebase(&frames[1], &Decoder::default(), &mut out);
    assert_eq!(r, Rebased::Unsupported("a use of an undefined entry"));
    assert!(out.is_empty());
    rebaser.reset();
    assert_eq!(rebase_all(&mut rebaser), want);
}
