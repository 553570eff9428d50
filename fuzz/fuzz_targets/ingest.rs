//! Arbitrary bytes as a publish request's body → the server's ingest (`ingest`), for
//! every content type it takes: Jelly (rebased or re-encoded), N-Quads, N-Triples,
//! Turtle, TriG, RDF/XML and JSON-LD, each behind its guards. Properties:
//! - it never panics, hangs or allocates without bound; a refusal is an error;
//! - every item it makes decodes alone, with a fresh decoder, to as many statements
//!   as it says, and the items served back to back (options row once) decode too;
//! - the statements of a text body, written as N-Quads and published again, come
//!   back the same (blank node labels that are not plain come back as the writer
//!   escapes them).
//!
//! Byte 0 picks the content type (bits 0-2), the topic's physical type (bit 3),
//! RDF-star (bit 4), generalized statements (bit 5), a base IRI (bit 6) and one item
//! per graph (bit 7); the rest is the body.
#![no_main]

#[path = "common/alloc_limit.rs"]
mod alloc_limit;

use jelly::splice::options_row_len;
use jelly::term::{escaped_blank_node_label, plain_blank_node_label};
use jelly::{Decoder, DecoderOptions, Event, Statement, Term, Triple};
use jelly_server::ingest::{InputFormat, PublishMeta, ingest};
use jelly_server::item::NewItem;
use jelly_server::topic::{Physical, TopicOptions};
use libfuzzer_sys::fuzz_target;

const FORMATS: [InputFormat; 7] = [
    InputFormat::Jelly,
    InputFormat::NQuads,
    InputFormat::NTriples,
    InputFormat::Turtle,
    InputFormat::TriG,
    InputFormat::RdfXml,
    InputFormat::JsonLd,
];

/// The statements of `frames`, decoded in order by one decoder.
fn decode(frames: &[&[u8]]) -> Vec<Statement> {
    let mut dec = Decoder::new(DecoderOptions::default());
    let mut out = Vec::new();
    for (i, f) in frames.iter().enumerate() {
        let mut cur = dec.frame(f);
        loop {
            match cur.next_event() {
                Ok(Some(Event::Statement(s))) => out.push(s.to_owned()),
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(e) => panic!("item {i} does not decode: {e}"),
            }
        }
    }
    out
}

/// The items' statements: each item alone, then all of them back to back.
fn statements(items: &[NewItem]) -> Vec<Statement> {
    let mut each = Vec::new();
    let mut spliced: Vec<&[u8]> = Vec::new();
    for (i, it) in items.iter().enumerate() {
        let alone = decode(&[&it.frame]);
        assert_eq!(
            alone.len(),
            it.statements as usize,
            "item {i}: statement count"
        );
        each.extend(alone);
        let skip = if i == 0 {
            0
        } else {
            options_row_len(&it.frame).unwrap_or(0)
        };
        spliced.push(&it.frame[skip..]);
    }
    assert_eq!(
        decode(&spliced),
        each,
        "the items back to back decode otherwise"
    );
    each
}

/// `t` with each blank node label as the N-Quads writer writes it.
fn as_written(t: Term) -> Term {
    match t {
        Term::BlankNode(l) if !plain_blank_node_label(&l) => {
            Term::BlankNode(escaped_blank_node_label(&l))
        }
        Term::Triple(t) => Term::Triple(Box::new(Triple {
            subject: as_written(t.subject),
            predicate: as_written(t.predicate),
            object: as_written(t.object),
        })),
        other => other,
    }
}

fuzz_target!(|data: &[u8]| {
    let [how, body @ ..] = data else { return };
    let format = FORMATS[usize::from(how & 7) % FORMATS.len()];
    let topic = TopicOptions {
        physical: if how & 8 == 0 {
            Physical::Quads
        } else {
            Physical::Triples
        },
        rdf_star: how & 16 != 0,
        generalized: how & 32 != 0,
        ..TopicOptions::default()
    };
    let meta = PublishMeta {
        source: "fuzz".into(),
        split_graph: how & 128 != 0,
        base_iri: (how & 64 != 0).then(|| "http://base.example/dir/file?q#f".into()),
        ..PublishMeta::default()
    };
    let Ok(items) = ingest(body, format, &topic, &meta, 1 << 20) else {
        return;
    };
    let got = statements(&items);
    if format == InputFormat::Jelly {
        return;
    }
    let mut text = String::new();
    for s in &got {
        text.push_str(&s.to_string());
        text.push('\n');
    }
    let again = ingest(text.as_bytes(), InputFormat::NQuads, &topic, &meta, 1 << 20)
        .unwrap_or_else(|e| panic!("its own statements are refused: {e}\n{text}"));
    let written: Vec<Statement> = got
        .into_iter()
        .map(|s| Statement {
            subject: as_written(s.subject),
            predicate: as_written(s.predicate),
            object: as_written(s.object),
            graph: s.graph.map(as_written),
        })
        .collect();
    assert_eq!(
        statements(&again),
        written,
        "published again, the statements differ\n{text}"
    );
});
