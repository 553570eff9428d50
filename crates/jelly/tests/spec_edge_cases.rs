//! Hand-built Jelly-RDF streams for the spec edge cases the official conformance suite
//! does not cover. Every stream here is written byte by byte with the wire primitives
//! (not with our encoder), and every expectation was worked out by hand from
//! `serialization.md` / `rdf.proto` (Jelly-RDF 1.1, row layout). Section numbers in the
//! comments refer to `/work/shared/jelly-spec-notes.md`.

use std::io::Read;
use std::time::{Duration, Instant};

use jelly::{
    DecodeError, DecodeErrorKind as K, Decoder, DecoderOptions, Delimiting, EncodeError, Encoder,
    Event, JellyReader, JellyWriter, JellyWriterBuilder, Literal, OwnedLiteralKind, PhysicalType,
    Statement, StatementRef, StreamOptions, Table, Term, TermRef, Triple, TripleRef,
    detect_delimiting, frame_metadata,
};
use jelly_proto::fields::{
    entry, frame as ff, graph_start as gs, iri as iri_f, literal as lit, namespace as ns_f,
    options as of, physical_type as pt, row, statement as st,
};
use jelly_proto::wire::{
    WireType, put_bytes_field, put_tag, put_uint_field, put_varint, varint_len,
};

// ---------------------------------------------------------------------------------------
// Builder
// ---------------------------------------------------------------------------------------

/// `RdfStreamOptions`, written field by field.
#[derive(Clone)]
struct Opts {
    stream_name: &'static str,
    physical: u32,
    generalized: bool,
    rdf_star: bool,
    name: u32,
    prefix: u32,
    datatype: u32,
    logical: u32,
    version: u32,
}

impl Opts {
    /// TRIPLES, name 8, prefix 0, datatype 4, version 1.
    fn triples() -> Self {
        Opts {
            stream_name: "",
            physical: pt::TRIPLES,
            generalized: false,
            rdf_star: false,
            name: 8,
            prefix: 0,
            datatype: 4,
            logical: 0,
            version: 1,
        }
    }
    fn physical(mut self, p: u32) -> Self {
        self.physical = p;
        self
    }
    fn tables(mut self, name: u32, prefix: u32, datatype: u32) -> Self {
        (self.name, self.prefix, self.datatype) = (name, prefix, datatype);
        self
    }
    fn version(mut self, v: u32) -> Self {
        self.version = v;
        self
    }
    fn star(mut self) -> Self {
        self.rdf_star = true;
        self
    }
    fn body(&self) -> Vec<u8> {
        let mut b = Vec::new();
        if !self.stream_name.is_empty() {
            put_bytes_field(&mut b, of::STREAM_NAME, self.stream_name.as_bytes());
        }
        put_uint_field(&mut b, of::PHYSICAL_TYPE, self.physical.into());
        put_uint_field(&mut b, of::GENERALIZED_STATEMENTS, self.generalized.into());
        put_uint_field(&mut b, of::RDF_STAR, self.rdf_star.into());
        put_uint_field(&mut b, of::MAX_NAME_TABLE_SIZE, self.name.into());
        put_uint_field(&mut b, of::MAX_PREFIX_TABLE_SIZE, self.prefix.into());
        put_uint_field(&mut b, of::MAX_DATATYPE_TABLE_SIZE, self.datatype.into());
        put_uint_field(&mut b, of::LOGICAL_TYPE, self.logical.into());
        put_uint_field(&mut b, of::VERSION, self.version.into());
        b
    }
}

/// `RdfIri{prefix_id, name_id}` body (0 = field absent).
fn iri(prefix_id: u32, name_id: u32) -> Vec<u8> {
    let mut b = Vec::new();
    put_uint_field(&mut b, iri_f::PREFIX_ID, prefix_id.into());
    put_uint_field(&mut b, iri_f::NAME_ID, name_id.into());
    b
}

/// Concatenation of length-delimited fields: a message body.
fn msg(fields: &[(u32, Vec<u8>)]) -> Vec<u8> {
    let mut b = Vec::new();
    for (f, v) in fields {
        put_bytes_field(&mut b, *f, v);
    }
    b
}

fn lit_simple(lex: &str) -> Vec<u8> {
    msg(&[(lit::LEX, lex.as_bytes().to_vec())])
}

fn lit_lang(lex: &str, tag: &str) -> Vec<u8> {
    msg(&[
        (lit::LEX, lex.as_bytes().to_vec()),
        (lit::LANGTAG, tag.as_bytes().to_vec()),
    ])
}

/// A typed literal; the datatype field is written even when it is 0.
fn lit_typed(lex: &str, dt: u32) -> Vec<u8> {
    let mut b = lit_simple(lex);
    put_tag(&mut b, lit::DATATYPE, WireType::Varint);
    put_varint(&mut b, dt.into());
    b
}

/// An entry row body (`RdfNameEntry` / `RdfPrefixEntry` / `RdfDatatypeEntry`).
fn entry_body(id: u32, value: &str) -> Vec<u8> {
    let mut b = Vec::new();
    put_uint_field(&mut b, entry::ID, id.into());
    put_bytes_field(&mut b, entry::VALUE, value.as_bytes());
    b
}

/// One `RdfStreamFrame` under construction.
#[derive(Default, Clone)]
struct F {
    b: Vec<u8>,
}

impl F {
    fn new() -> Self {
        F::default()
    }
    /// A row whose oneof field `field` holds `body`.
    fn row(self, field: u32, body: &[u8]) -> Self {
        let mut r = Vec::new();
        put_bytes_field(&mut r, field, body);
        self.raw_row(&r)
    }
    /// A row with arbitrary bytes.
    fn raw_row(mut self, row_bytes: &[u8]) -> Self {
        put_bytes_field(&mut self.b, ff::ROWS, row_bytes);
        self
    }
    fn options(self, o: &Opts) -> Self {
        self.row(row::OPTIONS, &o.body())
    }
    fn name(self, id: u32, v: &str) -> Self {
        self.row(row::NAME, &entry_body(id, v))
    }
    fn prefix(self, id: u32, v: &str) -> Self {
        self.row(row::PREFIX, &entry_body(id, v))
    }
    fn datatype(self, id: u32, v: &str) -> Self {
        self.row(row::DATATYPE, &entry_body(id, v))
    }
    fn triple(self, fields: &[(u32, Vec<u8>)]) -> Self {
        self.row(row::TRIPLE, &msg(fields))
    }
    fn quad(self, fields: &[(u32, Vec<u8>)]) -> Self {
        self.row(row::QUAD, &msg(fields))
    }
    fn graph_start(self, fields: &[(u32, Vec<u8>)]) -> Self {
        self.row(row::GRAPH_START, &msg(fields))
    }
    fn graph_end(self) -> Self {
        self.row(row::GRAPH_END, &[])
    }
    fn namespace(self, name: &str, value: Vec<u8>) -> Self {
        self.row(
            row::NAMESPACE,
            &msg(&[(ns_f::NAME, name.as_bytes().to_vec()), (ns_f::VALUE, value)]),
        )
    }
    /// A `metadata` map entry (field 15).
    fn meta(mut self, key: &str, value: &[u8]) -> Self {
        let e = msg(&[
            (ff::MAP_KEY, key.as_bytes().to_vec()),
            (ff::MAP_VALUE, value.to_vec()),
        ]);
        put_bytes_field(&mut self.b, ff::METADATA, &e);
        self
    }
    fn build(self) -> Vec<u8> {
        self.b
    }
}

/// The three names every small test uses: full IRIs, prefix table 0.
fn spo_names(f: F) -> F {
    f.name(0, "http://ex/s")
        .name(0, "http://ex/p")
        .name(0, "http://ex/o")
}

/// `s p o` with explicit name ids 1, 2, 3.
fn spo_fields() -> Vec<(u32, Vec<u8>)> {
    vec![
        (st::S_IRI, iri(0, 1)),
        (st::P_IRI, iri(0, 2)),
        (st::O_IRI, iri(0, 3)),
    ]
}

/// Delimited concatenation of frames.
fn delimited(frames: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for f in frames {
        put_varint(&mut out, f.len() as u64);
        out.extend_from_slice(f);
    }
    out
}

// ---------------------------------------------------------------------------------------
// Decoding helpers
// ---------------------------------------------------------------------------------------

/// An owned event.
#[derive(Debug, Clone, PartialEq)]
enum Ev {
    Options,
    St(Statement),
    Ns(String, String),
    GraphStart(Term),
    GraphEnd,
}

fn decode_with(cfg: DecoderOptions, frames: &[Vec<u8>]) -> Result<Vec<Ev>, DecodeError> {
    let mut dec = Decoder::new(cfg);
    let mut out = Vec::new();
    for f in frames {
        let mut cur = dec.frame(f);
        while let Some(ev) = cur.next_event()? {
            out.push(match ev {
                Event::Options(_) => Ev::Options,
                Event::Statement(s) => Ev::St(s.to_owned()),
                Event::Namespace { name, iri } => Ev::Ns(name.into(), iri.into()),
                Event::GraphStart(g) => Ev::GraphStart(g.to_owned()),
                Event::GraphEnd => Ev::GraphEnd,
            });
        }
    }
    Ok(out)
}

fn decode(frames: &[Vec<u8>]) -> Result<Vec<Ev>, DecodeError> {
    decode_with(DecoderOptions::default(), frames)
}

/// Statements only.
fn statements(frames: &[Vec<u8>]) -> Vec<Statement> {
    decode(frames)
        .unwrap()
        .into_iter()
        .filter_map(|e| match e {
            Ev::St(s) => Some(s),
            _ => None,
        })
        .collect()
}

fn decode_err_with(cfg: DecoderOptions, frames: &[Vec<u8>]) -> DecodeError {
    match decode_with(cfg, frames) {
        Ok(evs) => panic!("expected an error, decoded {evs:?}"),
        Err(e) => e,
    }
}

fn decode_err(frames: &[Vec<u8>]) -> DecodeError {
    decode_err_with(DecoderOptions::default(), frames)
}

/// Asserts the error's kind matches `$pat` and it is at `frame`, `row`.
macro_rules! assert_err_at {
    ($e:expr, $frame:expr, $row:expr, $pat:pat) => {{
        let e: DecodeError = $e;
        assert!(matches!(e.kind, $pat), "unexpected error kind: {e}");
        assert_eq!(
            (e.frame, e.row),
            ($frame, Some($row)),
            "wrong location: {e}"
        );
        e
    }};
}

fn i(s: &str) -> Term {
    Term::Iri(s.into())
}

fn bn(s: &str) -> Term {
    Term::BlankNode(s.into())
}

fn t(s: Term, p: Term, o: Term) -> Statement {
    Statement {
        subject: s,
        predicate: p,
        object: o,
        graph: None,
    }
}

fn q(s: Term, p: Term, o: Term, g: Term) -> Statement {
    Statement {
        subject: s,
        predicate: p,
        object: o,
        graph: Some(g),
    }
}

fn quoted(s: Term, p: Term, o: Term) -> Term {
    Term::Triple(Box::new(Triple {
        subject: s,
        predicate: p,
        object: o,
    }))
}

fn spo() -> Statement {
    t(i("http://ex/s"), i("http://ex/p"), i("http://ex/o"))
}

// ---------------------------------------------------------------------------------------
// Namespace declarations (§27, §21)
// ---------------------------------------------------------------------------------------

/// A namespace row emits its event and advances the IRI delta state: with the row
/// resolving name 1, the following all-zero IRIs are names 2, 3, 4. A decoder that skips
/// the row (the jelly_rs bug) would decode `<http://ex/> <http://ex/s> <http://ex/p>`.
#[test]
fn namespace_row_advances_iri_delta_state() {
    let opts = Opts::triples().tables(8, 8, 0).version(2);
    let f = F::new()
        .options(&opts)
        .prefix(0, "http://ex/")
        .name(0, "")
        .name(0, "s")
        .name(0, "p")
        .name(0, "o")
        // prefix 1 explicit, name_id 0 → 1 (first IRI of the stream).
        .namespace("ex", iri(1, 0))
        // Everything 0: prefix stays 1, names 2, 3, 4.
        .triple(&[
            (st::S_IRI, iri(0, 0)),
            (st::P_IRI, iri(0, 0)),
            (st::O_IRI, iri(0, 0)),
        ])
        .build();
    assert_eq!(
        decode(&[f]).unwrap(),
        vec![
            Ev::Options,
            Ev::Ns("ex".into(), "http://ex/".into()),
            Ev::St(spo()),
        ]
    );
}

/// A namespace declaration mid-stream, between two triples, with an empty name.
#[test]
fn namespace_row_mid_stream_between_triples() {
    let opts = Opts::triples().tables(8, 8, 0).version(2);
    let f0 = F::new()
        .options(&opts)
        .prefix(0, "http://ex/")
        .name(0, "s")
        .name(0, "p")
        .name(0, "o")
        .name(0, "")
        .triple(&[
            (st::S_IRI, iri(1, 0)), // prefix 1, name 1
            (st::P_IRI, iri(0, 0)), // name 2
            (st::O_IRI, iri(0, 0)), // name 3
        ])
        .build();
    let f1 = F::new()
        .namespace("", iri(0, 0)) // prefix 1, name 4 = "" → http://ex/
        .triple(&[(st::O_IRI, iri(0, 1))]) // S, P repeated; O = name 1 "s"
        .build();
    assert_eq!(
        decode(&[f0, f1]).unwrap(),
        vec![
            Ev::Options,
            Ev::St(spo()),
            Ev::Ns("".into(), "http://ex/".into()),
            Ev::St(t(i("http://ex/s"), i("http://ex/p"), i("http://ex/s"))),
        ]
    );
}

/// Namespace rows are allowed in every physical type.
#[test]
fn namespace_row_in_quads_and_graphs() {
    for p in [pt::QUADS, pt::GRAPHS] {
        let f = spo_names(F::new().options(&Opts::triples().physical(p).version(2)))
            .namespace("p", iri(0, 2))
            .build();
        assert_eq!(
            decode(&[f]).unwrap(),
            vec![Ev::Options, Ev::Ns("p".into(), "http://ex/p".into())]
        );
    }
}

#[test]
fn namespace_row_without_value_is_rejected() {
    let f = spo_names(F::new().options(&Opts::triples().version(2)))
        .row(row::NAMESPACE, &msg(&[(ns_f::NAME, b"ex".to_vec())]))
        .build();
    assert_err_at!(decode_err(&[f]), 0, 4, K::NamespaceWithoutIri);
}

#[test]
fn encoder_namespace_declarations_round_trip() {
    let mut out = Vec::new();
    let mut w = JellyWriterBuilder::new(StreamOptions::small())
        .namespace_declarations(true)
        .build(&mut out)
        .unwrap();
    w.declare_namespace("ex", "http://ex/").unwrap();
    w.add(spo().as_ref()).unwrap();
    w.declare_namespace("", "http://ex/o").unwrap();
    w.add(spo().as_ref()).unwrap();
    w.finish().unwrap();
    let mut r = JellyReader::new(&out[..]);
    let mut evs = Vec::new();
    r.for_each_event(|_, ev| match ev {
        Event::Namespace { name, iri } => evs.push(Ev::Ns(name.into(), iri.into())),
        Event::Statement(s) => evs.push(Ev::St(s.to_owned())),
        _ => {}
    })
    .unwrap();
    assert_eq!(r.decoder().options().unwrap().version, 2);
    assert_eq!(
        evs,
        vec![
            Ev::Ns("ex".into(), "http://ex/".into()),
            Ev::St(spo()),
            Ev::Ns("".into(), "http://ex/o".into()),
            Ev::St(spo()),
        ]
    );
}

// ---------------------------------------------------------------------------------------
// Frame metadata (§10)
// ---------------------------------------------------------------------------------------

#[test]
fn frame_metadata_is_exposed_and_does_not_change_the_rdf() {
    let rows = spo_names(F::new().options(&Opts::triples())).triple(&spo_fields());
    let plain = rows.clone().build();
    let with_meta = rows
        .meta("ts", b"2025-01-01")
        .meta("bin", &[0xff, 0x00, 0xfe])
        .build();
    // Metadata before the rows on the wire (legal protobuf field order) as well.
    let meta_first = spo_names(F::new().meta("k", b"v").options(&Opts::triples()))
        .triple(&spo_fields())
        .meta("k2", b"")
        .build();

    assert_eq!(
        decode(std::slice::from_ref(&plain)).unwrap(),
        decode(std::slice::from_ref(&with_meta)).unwrap()
    );
    assert_eq!(
        decode(&[plain]).unwrap(),
        decode(std::slice::from_ref(&meta_first)).unwrap()
    );

    let mut dec = Decoder::default();
    let cur = dec.frame(&with_meta);
    assert_eq!(
        cur.metadata().unwrap(),
        vec![("ts", &b"2025-01-01"[..]), ("bin", &[0xff, 0x00, 0xfe][..])]
    );
    assert_eq!(
        frame_metadata(&meta_first).unwrap(),
        vec![("k", &b"v"[..]), ("k2", &b""[..])]
    );
}

#[test]
fn encoder_frame_metadata_round_trips() {
    let mut enc = Encoder::new(StreamOptions::small()).unwrap();
    enc.set_frame_metadata("source", "sensor-7");
    enc.set_frame_metadata("raw", vec![0u8, 0xc3, 0x28]); // invalid UTF-8 on purpose
    enc.add(spo().as_ref()).unwrap();
    let f0 = enc.finish_frame();
    enc.add(spo().as_ref()).unwrap();
    let f1 = enc.finish_frame();
    assert_eq!(
        frame_metadata(&f0).unwrap(),
        vec![
            ("source", &b"sensor-7"[..]),
            ("raw", &[0u8, 0xc3, 0x28][..])
        ]
    );
    assert!(
        frame_metadata(&f1).unwrap().is_empty(),
        "metadata is per frame"
    );
    assert_eq!(statements(&[f0, f1]), vec![spo(), spo()]);
}

/// A frame with metadata and no rows (a heartbeat, a marker) is written by the
/// writers too, not held back until the next frame with rows.
#[test]
fn writer_writes_a_frame_with_metadata_and_no_rows() {
    let mut out = Vec::new();
    let mut w = JellyWriterBuilder::new(StreamOptions::small())
        .frame_policy(jelly::FramePolicy::Manual)
        .build_vec(&mut out)
        .unwrap();
    w.add(spo().as_ref()).unwrap();
    w.flush_frame().unwrap();
    w.encoder().set_frame_metadata("heartbeat", "1");
    assert!(w.encoder().has_frame_metadata());
    w.flush_frame().unwrap();
    assert!(!w.encoder().has_frame_metadata());
    // An empty frame without metadata is still not written.
    w.flush_frame().unwrap();
    w.add(spo().as_ref()).unwrap();
    w.finish().unwrap();
    let mut frames = jelly::FrameReader::from_slice(&out, Delimiting::Delimited, 1 << 20);
    let mut metas = Vec::new();
    while let Some(f) = frames.next_frame().unwrap() {
        metas.push(
            frame_metadata(f.bytes)
                .unwrap()
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_vec()))
                .collect::<Vec<_>>(),
        );
    }
    assert_eq!(
        metas,
        vec![
            vec![],
            vec![("heartbeat".to_owned(), b"1".to_vec())],
            vec![]
        ]
    );
    assert_eq!(
        read_stream(&out, DecoderOptions::default(), Delimiting::Auto).unwrap(),
        vec![vec![spo()], vec![], vec![spo()]]
    );
}

// ---------------------------------------------------------------------------------------
// IRI rules (§21)
// ---------------------------------------------------------------------------------------

/// `prefix_id = 0` before any explicit prefix means the empty prefix, even with the
/// prefix table enabled (the jelly_rs bug rejected this stream).
#[test]
fn prefix_id_zero_on_first_iri_with_prefix_table_enabled() {
    let f = F::new()
        .options(&Opts::triples().tables(8, 8, 0))
        .name(0, "http://ex/s")
        .name(0, "p")
        .prefix(0, "http://ex/")
        .name(0, "o")
        .triple(&[
            (st::S_IRI, iri(0, 0)), // "" + name 1
            (st::P_IRI, iri(1, 0)), // prefix 1 + name 2
            (st::O_IRI, iri(0, 0)), // prefix 1 (last explicit) + name 3
        ])
        .build();
    assert_eq!(statements(&[f]), vec![spo()]);
}

/// `prefix_id = 0` repeats the last *explicit* prefix across statements and frames;
/// `name_id = 0` is previous + 1 across statements and frames.
#[test]
fn iri_delta_state_carries_across_statements_and_frames() {
    let f0 = F::new()
        .options(&Opts::triples().tables(8, 4, 0))
        .prefix(0, "http://a/")
        .prefix(0, "http://b/")
        .name(0, "1")
        .name(0, "2")
        .name(0, "3")
        .name(0, "4")
        .name(0, "5")
        .name(0, "6")
        .triple(&[
            (st::S_IRI, iri(2, 1)),
            (st::P_IRI, iri(0, 0)),
            (st::O_IRI, iri(1, 0)),
        ])
        .build();
    let f1 = F::new()
        .triple(&[
            (st::S_IRI, iri(0, 0)),
            (st::P_IRI, iri(2, 0)),
            (st::O_IRI, iri(0, 0)),
        ])
        .build();
    assert_eq!(
        statements(&[f0, f1]),
        vec![
            t(i("http://b/1"), i("http://b/2"), i("http://a/3")),
            t(i("http://a/4"), i("http://b/5"), i("http://b/6")),
        ]
    );
}

// ---------------------------------------------------------------------------------------
// Options: version, physical type, repeats (§4, §12, §14)
// ---------------------------------------------------------------------------------------

#[test]
fn version_zero_is_rejected() {
    let f = F::new().options(&Opts::triples().version(0)).build();
    assert_err_at!(decode_err(&[f]), 0, 0, K::ZeroVersion);
}

#[test]
fn version_above_supported_is_rejected() {
    for v in [3, 10_001] {
        let f = F::new().options(&Opts::triples().version(v)).build();
        let e = assert_err_at!(decode_err(&[f]), 0, 0, K::UnsupportedVersion(_));
        assert!(matches!(e.kind, K::UnsupportedVersion(x) if x == v));
    }
}

#[test]
fn versions_one_and_two_are_accepted() {
    for v in [1, 2] {
        let f = spo_names(F::new().options(&Opts::triples().version(v)))
            .triple(&spo_fields())
            .build();
        assert_eq!(statements(&[f]), vec![spo()]);
    }
}

#[test]
fn physical_type_unspecified_is_rejected() {
    let f = F::new()
        .options(&Opts::triples().physical(pt::UNSPECIFIED))
        .build();
    assert_err_at!(decode_err(&[f]), 0, 0, K::PhysicalTypeUnspecified);
}

#[test]
fn unknown_physical_type_is_rejected() {
    let f = F::new().options(&Opts::triples().physical(7)).build();
    assert_err_at!(decode_err(&[f]), 0, 0, K::UnknownPhysicalType(7));
}

#[test]
fn options_must_come_first() {
    let f = spo_names(F::new()).options(&Opts::triples()).build();
    assert_err_at!(decode_err(&[f]), 0, 0, K::MissingOptions);
}

#[test]
fn identical_repeated_options_are_accepted() {
    let o = Opts::triples();
    let f0 = spo_names(F::new().options(&o))
        .options(&o)
        .triple(&spo_fields())
        .build();
    let f1 = F::new()
        .options(&o)
        .triple(&[(st::O_IRI, iri(0, 1))])
        .build();
    assert_eq!(
        decode(&[f0, f1]).unwrap(),
        vec![
            Ev::Options, // only the first options row is reported
            Ev::St(spo()),
            Ev::St(t(i("http://ex/s"), i("http://ex/p"), i("http://ex/s"))),
        ]
    );
}

#[test]
fn differing_repeated_options_are_rejected() {
    let o = Opts::triples();
    let mut other = o.clone();
    other.stream_name = "renamed";
    let f0 = spo_names(F::new().options(&o)).build();
    let f1 = F::new()
        .triple(&spo_fields())
        .triple(&spo_fields())
        .options(&other)
        .build();
    assert_err_at!(decode_err(&[f0, f1]), 1, 2, K::OptionsChanged);
    // A differing table size, in the same frame.
    let f = F::new()
        .options(&o)
        .options(&o.clone().tables(16, 0, 4))
        .build();
    assert_err_at!(decode_err(&[f]), 0, 1, K::OptionsChanged);
}

// ---------------------------------------------------------------------------------------
// GRAPHS (§15)
// ---------------------------------------------------------------------------------------

fn graphs_opts() -> Opts {
    Opts::triples().physical(pt::GRAPHS)
}

/// names: 1 s, 2 p, 3 o, 4 g
fn graphs_head() -> F {
    spo_names(F::new().options(&graphs_opts())).name(0, "http://ex/g")
}

#[test]
fn graphs_triple_outside_graph_is_rejected() {
    let f = graphs_head().triple(&spo_fields()).build();
    assert_err_at!(decode_err(&[f]), 0, 5, K::TripleOutsideGraph);
    // Also after a graph was closed.
    let f = graphs_head()
        .graph_start(&[(gs::G_IRI, iri(0, 4))])
        .triple(&spo_fields())
        .graph_end()
        .triple(&spo_fields())
        .build();
    assert_err_at!(decode_err(&[f]), 0, 8, K::TripleOutsideGraph);
}

#[test]
fn graphs_nested_graph_start_is_rejected() {
    let f = graphs_head()
        .graph_start(&[(gs::G_IRI, iri(0, 4))])
        .graph_start(&[(gs::G_DEFAULT, vec![])])
        .build();
    assert_err_at!(decode_err(&[f]), 0, 6, K::NestedGraphStart);
}

#[test]
fn graphs_graph_start_without_graph_is_rejected() {
    let f = graphs_head().graph_start(&[]).build();
    assert_err_at!(decode_err(&[f]), 0, 5, K::GraphStartUnset);
}

#[test]
fn graphs_graph_spans_frames_and_repeats() {
    let g = i("http://ex/g");
    let f0 = graphs_head()
        .graph_start(&[(gs::G_IRI, iri(0, 4))])
        .triple(&spo_fields())
        .build();
    let f1 = F::new()
        .triple(&[(st::O_IRI, iri(0, 1))])
        .graph_end()
        // The same graph again, then the default graph, then a blank-node graph.
        .graph_start(&[(gs::G_IRI, iri(0, 4))])
        .triple(&[(st::O_BNODE, b"x".to_vec())])
        .graph_end()
        .graph_start(&[(gs::G_DEFAULT, vec![])])
        .triple(&spo_fields())
        .graph_end()
        .graph_start(&[(gs::G_BNODE, b"g1".to_vec())])
        .graph_end()
        .build();
    let evs = decode(&[f0, f1]).unwrap();
    assert_eq!(
        evs,
        vec![
            Ev::Options,
            Ev::GraphStart(g.clone()),
            Ev::St(q(
                i("http://ex/s"),
                i("http://ex/p"),
                i("http://ex/o"),
                g.clone()
            )),
            Ev::St(q(
                i("http://ex/s"),
                i("http://ex/p"),
                i("http://ex/s"),
                g.clone()
            )),
            Ev::GraphEnd,
            Ev::GraphStart(g.clone()),
            Ev::St(q(i("http://ex/s"), i("http://ex/p"), bn("x"), g.clone())),
            Ev::GraphEnd,
            Ev::GraphStart(Term::DefaultGraph),
            Ev::St(q(
                i("http://ex/s"),
                i("http://ex/p"),
                i("http://ex/o"),
                Term::DefaultGraph
            )),
            Ev::GraphEnd,
            Ev::GraphStart(bn("g1")), // an empty graph is fine
            Ev::GraphEnd,
        ]
    );
}

#[test]
fn graphs_empty_graph_is_accepted() {
    let f = graphs_head()
        .graph_start(&[(gs::G_IRI, iri(0, 4))])
        .graph_end()
        .build();
    assert_eq!(
        decode(&[f]).unwrap(),
        vec![Ev::Options, Ev::GraphStart(i("http://ex/g")), Ev::GraphEnd]
    );
}

#[test]
fn graphs_graph_start_with_two_graphs_is_rejected() {
    let f = graphs_head()
        .graph_start(&[(gs::G_IRI, iri(0, 4)), (gs::G_DEFAULT, vec![])])
        .build();
    assert_err_at!(
        decode_err(&[f]),
        0,
        5,
        K::MultipleTermFields { position: "graph" }
    );
}

// ---------------------------------------------------------------------------------------
// Repeated terms and quoted triples (§24, §25)
// ---------------------------------------------------------------------------------------

#[test]
fn repeated_terms_carry_across_frames() {
    let f0 = spo_names(F::new().options(&Opts::triples()))
        .triple(&spo_fields())
        .build();
    let f1 = F::new().triple(&[(st::P_IRI, iri(0, 3))]).build();
    let f2 = F::new().triple(&[]).build(); // everything repeated
    assert_eq!(
        statements(&[f0, f1, f2]),
        vec![
            spo(),
            t(i("http://ex/s"), i("http://ex/o"), i("http://ex/o")),
            t(i("http://ex/s"), i("http://ex/o"), i("http://ex/o")),
        ]
    );
}

#[test]
fn repeated_typed_literal_keeps_its_datatype_after_the_entry_changes() {
    // The decoder lends a typed literal's datatype from the table; a repeated object
    // must keep the datatype it was decoded with when that entry is redefined.
    let int = "http://www.w3.org/2001/XMLSchema#int";
    let long = "http://www.w3.org/2001/XMLSchema#long";
    let o = Opts::triples();
    let f0 = spo_names(F::new().options(&o))
        .datatype(0, int)
        .triple(&[
            (st::S_IRI, iri(0, 1)),
            (st::P_IRI, iri(0, 2)),
            (st::O_LITERAL, lit_typed("7", 1)),
        ])
        .datatype(1, long)
        .triple(&[(st::S_IRI, iri(0, 3))]) // P and O repeated
        .build();
    let f1 = F::new()
        .options(&o)
        .triple(&[(st::S_IRI, iri(0, 1))]) // O repeated after another options row
        .triple(&[(st::O_LITERAL, lit_typed("8", 1))])
        .build();
    let typed = |lex: &str, dt: &str| {
        Term::Literal(Literal {
            lex: lex.into(),
            kind: OwnedLiteralKind::Typed(dt.into()),
        })
    };
    assert_eq!(
        statements(&[f0, f1]),
        vec![
            t(i("http://ex/s"), i("http://ex/p"), typed("7", int)),
            t(i("http://ex/o"), i("http://ex/p"), typed("7", int)),
            t(i("http://ex/s"), i("http://ex/p"), typed("7", int)),
            t(i("http://ex/s"), i("http://ex/p"), typed("8", long)),
        ]
    );
}

#[test]
fn repeated_terms_in_quads_including_graph() {
    let opts = Opts::triples().physical(pt::QUADS);
    let f = spo_names(F::new().options(&opts))
        .quad(&[
            (st::S_IRI, iri(0, 1)),
            (st::P_IRI, iri(0, 2)),
            (st::O_IRI, iri(0, 3)),
            (st::G_BNODE, b"g".to_vec()),
        ])
        .quad(&[(st::S_BNODE, b"b0".to_vec())])
        .build();
    assert_eq!(
        statements(&[f]),
        vec![
            q(
                i("http://ex/s"),
                i("http://ex/p"),
                i("http://ex/o"),
                bn("g")
            ),
            q(bn("b0"), i("http://ex/p"), i("http://ex/o"), bn("g")),
        ]
    );
}

#[test]
fn repeated_term_in_first_statement_is_rejected() {
    let f = spo_names(F::new().options(&Opts::triples()))
        .triple(&[(st::S_IRI, iri(0, 1)), (st::O_IRI, iri(0, 3))])
        .build();
    assert_err_at!(
        decode_err(&[f]),
        0,
        4,
        K::RepeatedTermFirst {
            position: "predicate"
        }
    );
    // The graph of the first quad, too.
    let f = spo_names(F::new().options(&Opts::triples().physical(pt::QUADS)))
        .quad(&spo_fields())
        .build();
    assert_err_at!(
        decode_err(&[f]),
        0,
        4,
        K::RepeatedTermFirst { position: "graph" }
    );
}

/// Body of a statement whose subject is nested `depth` quoted triples deep; at the
/// innermost level the term `missing` (0..3) is left out, if given. Fields are written
/// predicate, object, then subject, so the nesting is a run of headers followed by the
/// innermost triple, and it can be built in linear time for any depth.
fn nested_subject(depth: usize, missing: Option<usize>) -> Vec<u8> {
    let full = spo_fields();
    let inner: Vec<(u32, Vec<u8>)> = full
        .iter()
        .enumerate()
        .filter(|(k, _)| Some(*k) != missing)
        .map(|(_, f)| f.clone())
        .collect();
    let inner = msg(&inner);
    let po = msg(&full[1..]);
    let mut lens = vec![inner.len()];
    for _ in 0..depth {
        let l = *lens.last().unwrap();
        lens.push(po.len() + 1 + varint_len(l as u64) + l);
    }
    let mut out = Vec::with_capacity(lens[depth]);
    for k in (1..=depth).rev() {
        out.extend_from_slice(&po);
        put_tag(&mut out, st::S_TRIPLE, WireType::Len);
        put_varint(&mut out, lens[k - 1] as u64);
    }
    out.extend_from_slice(&inner);
    out
}

fn star_head() -> F {
    spo_names(F::new().options(&Opts::triples().star()))
}

#[test]
fn quoted_triples_decode_at_depth() {
    let f = star_head()
        .row(row::TRIPLE, &nested_subject(3, None))
        .build();
    let (s, p, o) = (i("http://ex/s"), i("http://ex/p"), i("http://ex/o"));
    let mut subj = quoted(s.clone(), p.clone(), o.clone());
    for _ in 0..2 {
        subj = quoted(subj, p.clone(), o.clone());
    }
    assert_eq!(statements(&[f]), vec![t(subj, p, o)]);
}

#[test]
fn missing_term_in_quoted_triple_is_rejected() {
    // Depth 1, subject missing; a previous statement exists, so "repeat" would be
    // resolvable, and still it MUST be rejected inside a quoted triple.
    let f = star_head()
        .triple(&spo_fields())
        .row(row::TRIPLE, &nested_subject(1, Some(0)))
        .build();
    assert_err_at!(
        decode_err(&[f]),
        0,
        5,
        K::RepeatedTermInQuoted {
            position: "subject"
        }
    );
    // Depth 3, object missing.
    let f = star_head()
        .triple(&spo_fields())
        .row(row::TRIPLE, &nested_subject(3, Some(2)))
        .build();
    assert_err_at!(
        decode_err(&[f]),
        0,
        5,
        K::RepeatedTermInQuoted { position: "object" }
    );
}

#[test]
fn nesting_deeper_than_limit_is_rejected() {
    let cfg = DecoderOptions {
        max_nesting: 2,
        ..Default::default()
    };
    let ok = star_head()
        .row(row::TRIPLE, &nested_subject(2, None))
        .build();
    assert_eq!(decode_with(cfg.clone(), &[ok]).unwrap().len(), 2);
    let deep = star_head()
        .row(row::TRIPLE, &nested_subject(3, None))
        .build();
    assert_err_at!(decode_err_with(cfg, &[deep]), 0, 4, K::TooDeep(2));
}

/// 100 000 levels of nesting: an error, not a stack overflow, and fast.
#[test]
fn hostile_deep_nesting_errors_without_overflow() {
    let start = Instant::now();
    let body = nested_subject(100_000, None);
    let deep = star_head().row(row::TRIPLE, &body).build();
    let e = assert_err_at!(
        decode_err(std::slice::from_ref(&deep)),
        0,
        4,
        K::TooDeep(100)
    );
    assert!(e.to_string().contains("100"));
    // Also through the reader, delimited.
    let stream = delimited(&[deep]);
    let err = JellyReader::new(&stream[..]).read_all_frames().unwrap_err();
    assert!(matches!(err.kind, K::TooDeep(100)), "{err}");
    assert!(start.elapsed() < Duration::from_secs(20));
}

/// A caller's `max_nesting` above the hard cap acts as the cap: 20 000 levels with
/// `max_nesting: usize::MAX` are refused at the cap instead of overflowing the stack
/// (decoding and everything done with the term recurse once per level).
#[test]
fn max_nesting_above_the_cap_is_capped() {
    let cfg = DecoderOptions {
        max_nesting: usize::MAX,
        ..Default::default()
    };
    let at_cap = star_head()
        .row(row::TRIPLE, &nested_subject(jelly::MAX_NESTING_CAP, None))
        .build();
    assert_eq!(decode_with(cfg.clone(), &[at_cap]).unwrap().len(), 2);
    let over = star_head()
        .row(
            row::TRIPLE,
            &nested_subject(jelly::MAX_NESTING_CAP + 1, None),
        )
        .build();
    assert_err_at!(
        decode_err_with(cfg.clone(), &[over]),
        0,
        4,
        K::TooDeep(jelly::MAX_NESTING_CAP)
    );
    let hostile = star_head()
        .row(row::TRIPLE, &nested_subject(20_000, None))
        .build();
    assert_err_at!(
        decode_err_with(cfg, &[hostile]),
        0,
        4,
        K::TooDeep(jelly::MAX_NESTING_CAP)
    );
}

#[test]
fn quoted_triple_without_rdf_star_is_rejected() {
    let f = spo_names(F::new().options(&Opts::triples()))
        .row(row::TRIPLE, &nested_subject(1, None))
        .build();
    assert_err_at!(
        decode_err(&[f]),
        0,
        4,
        K::RdfStarNotAllowed {
            position: "subject"
        }
    );
}

#[test]
fn generalized_term_without_flag_is_rejected() {
    let f = spo_names(F::new().options(&Opts::triples()))
        .triple(&[
            (st::S_LITERAL, lit_simple("x")),
            (st::P_IRI, iri(0, 2)),
            (st::O_IRI, iri(0, 3)),
        ])
        .build();
    assert_err_at!(
        decode_err(&[f]),
        0,
        4,
        K::GeneralizedNotAllowed {
            kind: "literal",
            position: "subject"
        }
    );
}

// ---------------------------------------------------------------------------------------
// Lookup tables (§18, §19, §22, §29)
// ---------------------------------------------------------------------------------------

/// id 0 → 1 for the first entry, then previous + 1, also after an explicit id.
#[test]
fn entry_id_zero_rule() {
    let f = F::new()
        .options(&Opts::triples())
        .name(0, "http://ex/1") // → 1
        .name(0, "http://ex/2") // → 2
        .name(5, "http://ex/5") // explicit 5
        .name(0, "http://ex/6") // → 6
        .name(2, "http://ex/2b") // overwrite 2
        .name(0, "http://ex/3") // → 3 (previous entry + 1, not max + 1)
        .triple(&[
            (st::S_IRI, iri(0, 1)),
            (st::P_IRI, iri(0, 0)), // 2
            (st::O_IRI, iri(0, 0)), // 3
        ])
        .triple(&[
            (st::S_IRI, iri(0, 5)),
            (st::P_IRI, iri(0, 0)), // 6
        ])
        .build();
    assert_eq!(
        statements(&[f]),
        vec![
            t(i("http://ex/1"), i("http://ex/2b"), i("http://ex/3")),
            t(i("http://ex/5"), i("http://ex/6"), i("http://ex/3")),
        ]
    );
}

/// The three tables count separately (each "first entry" is 1).
#[test]
fn entry_id_rule_is_per_table() {
    let f = F::new()
        .options(&Opts::triples().tables(8, 4, 4))
        .name(0, "s") // name 1
        .prefix(0, "http://ex/") // prefix 1
        .datatype(0, "http://ex/dt") // datatype 1
        .name(0, "p") // name 2
        .triple(&[
            (st::S_IRI, iri(1, 1)),
            (st::P_IRI, iri(0, 2)),
            (st::O_LITERAL, lit_typed("v", 1)),
        ])
        .build();
    assert_eq!(
        statements(&[f]),
        vec![t(
            i("http://ex/s"),
            i("http://ex/p"),
            Term::Literal(Literal {
                lex: "v".into(),
                kind: OwnedLiteralKind::Typed("http://ex/dt".into())
            })
        )]
    );
}

#[test]
fn entry_id_out_of_range_is_rejected() {
    let f = F::new().options(&Opts::triples()).name(9, "x").build();
    assert_err_at!(
        decode_err(&[f]),
        0,
        1,
        K::EntryIdOutOfRange {
            table: Table::Name,
            id: 9,
            max: 8
        }
    );
    // Implicit id walking off the table: explicit 8, then 0 → 9.
    let f = F::new()
        .options(&Opts::triples())
        .name(8, "x")
        .name(0, "y")
        .build();
    assert_err_at!(
        decode_err(&[f]),
        0,
        2,
        K::EntryIdOutOfRange {
            table: Table::Name,
            id: 9,
            max: 8
        }
    );
    let f = F::new()
        .options(&Opts::triples().tables(8, 2, 1))
        .datatype(0, "a")
        .datatype(0, "b")
        .build();
    assert_err_at!(
        decode_err(&[f]),
        0,
        2,
        K::EntryIdOutOfRange {
            table: Table::Datatype,
            id: 2,
            max: 1
        }
    );
    let f = F::new()
        .options(&Opts::triples().tables(8, 2, 1))
        .prefix(3, "a")
        .build();
    assert_err_at!(
        decode_err(&[f]),
        0,
        1,
        K::EntryIdOutOfRange {
            table: Table::Prefix,
            id: 3,
            max: 2
        }
    );
}

#[test]
fn reference_out_of_range_is_rejected() {
    let f = spo_names(F::new().options(&Opts::triples()))
        .triple(&[
            (st::S_IRI, iri(0, 9)),
            (st::P_IRI, iri(0, 2)),
            (st::O_IRI, iri(0, 3)),
        ])
        .build();
    assert_err_at!(
        decode_err(&[f]),
        0,
        4,
        K::EntryIdOutOfRange {
            table: Table::Name,
            id: 9,
            ..
        }
    );
}

#[test]
fn undefined_reference_is_rejected() {
    let f = spo_names(F::new().options(&Opts::triples()))
        .triple(&[
            (st::S_IRI, iri(0, 1)),
            (st::P_IRI, iri(0, 2)),
            (st::O_IRI, iri(0, 4)), // in range, never defined
        ])
        .build();
    assert_err_at!(
        decode_err(&[f]),
        0,
        4,
        K::UndefinedEntry {
            table: Table::Name,
            id: 4
        }
    );
    let f = spo_names(F::new().options(&Opts::triples().tables(8, 4, 4)))
        .triple(&[
            (st::S_IRI, iri(2, 1)),
            (st::P_IRI, iri(0, 2)),
            (st::O_IRI, iri(0, 3)),
        ])
        .build();
    assert_err_at!(
        decode_err(&[f]),
        0,
        4,
        K::UndefinedEntry {
            table: Table::Prefix,
            id: 2
        }
    );
    let f = spo_names(F::new().options(&Opts::triples()))
        .triple(&[
            (st::S_IRI, iri(0, 1)),
            (st::P_IRI, iri(0, 2)),
            (st::O_LITERAL, lit_typed("1", 3)),
        ])
        .build();
    assert_err_at!(
        decode_err(&[f]),
        0,
        4,
        K::UndefinedEntry {
            table: Table::Datatype,
            id: 3
        }
    );
}

/// A run of `name_id = 0` that walks past the last entry (suite neg_008 analogue).
#[test]
fn name_id_zero_run_walking_off_the_table() {
    let mut f = F::new().options(&Opts::triples());
    for k in 1..=8 {
        f = f.name(0, &format!("http://ex/{k}"));
    }
    let f0 = f
        .triple(&[
            (st::S_IRI, iri(0, 6)),
            (st::P_IRI, iri(0, 0)), // 7
            (st::O_IRI, iri(0, 0)), // 8
        ])
        .build();
    let f1 = F::new().triple(&[(st::O_IRI, iri(0, 0))]).build(); // 9
    let e = assert_err_at!(
        decode_err(&[f0, f1]),
        1,
        0,
        K::EntryIdOutOfRange {
            table: Table::Name,
            id: 9,
            max: 8
        }
    );
    assert!(e.to_string().starts_with("frame 1, row 0"), "{e}");
}

#[test]
fn prefix_table_disabled() {
    // A prefix row while the table size is 0.
    let f = F::new()
        .options(&Opts::triples())
        .prefix(0, "http://ex/")
        .build();
    assert_err_at!(decode_err(&[f]), 0, 1, K::PrefixTableDisabled);
    // A prefix reference while the table size is 0.
    let f = spo_names(F::new().options(&Opts::triples()))
        .triple(&[
            (st::S_IRI, iri(1, 1)),
            (st::P_IRI, iri(0, 2)),
            (st::O_IRI, iri(0, 3)),
        ])
        .build();
    assert_err_at!(decode_err(&[f]), 0, 4, K::PrefixTableDisabled);
}

#[test]
fn literal_rules() {
    let f = spo_names(F::new().options(&Opts::triples()))
        .triple(&[
            (st::S_IRI, iri(0, 1)),
            (st::P_IRI, iri(0, 2)),
            (st::O_LITERAL, lit_typed("1", 0)),
        ])
        .build();
    assert_err_at!(decode_err(&[f]), 0, 4, K::DatatypeZero);
    let mut both = lit_lang("x", "en");
    put_uint_field(&mut both, lit::DATATYPE, 1);
    let f = spo_names(F::new().options(&Opts::triples()))
        .datatype(0, "http://ex/dt")
        .triple(&[
            (st::S_IRI, iri(0, 1)),
            (st::P_IRI, iri(0, 2)),
            (st::O_LITERAL, both),
        ])
        .build();
    assert_err_at!(decode_err(&[f]), 0, 5, K::LangAndDatatype);
    // Empty lexical form and language tags are fine.
    let f = spo_names(F::new().options(&Opts::triples()))
        .triple(&[
            (st::S_IRI, iri(0, 1)),
            (st::P_IRI, iri(0, 2)),
            (st::O_LITERAL, vec![]),
        ])
        .triple(&[(st::O_LITERAL, lit_lang("", "de-CH"))])
        // The language oneof set to an empty tag (a writer that always sets the
        // field): a simple literal, as Jelly-JVM and pyjelly read it; short and long
        // literals take different paths in the decoder.
        .triple(&[(st::O_LITERAL, lit_lang("x", ""))])
        .triple(&[(st::O_LITERAL, lit_lang(&"y".repeat(300), ""))])
        .build();
    assert_eq!(
        statements(&[f]),
        vec![
            t(i("http://ex/s"), i("http://ex/p"), Term::simple_literal("")),
            t(
                i("http://ex/s"),
                i("http://ex/p"),
                Term::Literal(Literal {
                    lex: "".into(),
                    kind: OwnedLiteralKind::Lang("de-CH".into())
                })
            ),
            t(
                i("http://ex/s"),
                i("http://ex/p"),
                Term::simple_literal("x")
            ),
            t(
                i("http://ex/s"),
                i("http://ex/p"),
                Term::simple_literal("y".repeat(300))
            ),
        ]
    );
}

// ---------------------------------------------------------------------------------------
// Table-size caps (§11, §28)
// ---------------------------------------------------------------------------------------

#[test]
fn table_size_caps() {
    for (name, prefix, dt, table, requested, limit) in [
        (4097, 0, 0, Table::Name, 4097, 4096),
        (8, 1025, 0, Table::Prefix, 1025, 1024),
        (8, 0, 257, Table::Datatype, 257, 256),
        (10_000_000, 0, 0, Table::Name, 10_000_000, 4096),
        (8, 10_000_000, 0, Table::Prefix, 10_000_000, 1024),
        (8, 0, 10_000_000, Table::Datatype, 10_000_000, 256),
    ] {
        let f = F::new()
            .options(&Opts::triples().tables(name, prefix, dt))
            .build();
        let e = assert_err_at!(decode_err(&[f]), 0, 0, K::TableTooLarge { .. });
        assert!(
            matches!(e.kind, K::TableTooLarge { table: t, requested: r, limit: l }
                if t == table && r == requested && l == limit),
            "{e}"
        );
    }
    // Exactly at the caps: accepted, and the top ids are usable.
    let f = F::new()
        .options(&Opts::triples().tables(4096, 1024, 256))
        .name(4096, "s")
        .name(1, "p")
        .prefix(1024, "http://ex/")
        .datatype(256, "http://ex/dt")
        .triple(&[
            (st::S_IRI, iri(1024, 4096)),
            (st::P_IRI, iri(0, 1)),
            (st::O_LITERAL, lit_typed("v", 256)),
        ])
        .build();
    assert_eq!(statements(&[f]).len(), 1);
    // Custom, lower caps.
    let cfg = DecoderOptions {
        max_name_table_size: 16,
        ..Default::default()
    };
    let f = F::new().options(&Opts::triples().tables(17, 0, 0)).build();
    assert_err_at!(
        decode_err_with(cfg, &[f]),
        0,
        0,
        K::TableTooLarge {
            table: Table::Name,
            requested: 17,
            limit: 16
        }
    );
}

#[test]
fn name_table_below_eight_is_rejected() {
    for n in [0, 1, 7] {
        let f = F::new().options(&Opts::triples().tables(n, 0, 0)).build();
        let e = assert_err_at!(decode_err(&[f]), 0, 0, K::NameTableTooSmall(_));
        assert!(matches!(e.kind, K::NameTableTooSmall(x) if x == n));
    }
    let f = spo_names(F::new().options(&Opts::triples().tables(8, 0, 0)))
        .triple(&spo_fields())
        .build();
    assert_eq!(statements(&[f]), vec![spo()]);
}

// ---------------------------------------------------------------------------------------
// Rows (§7, §14)
// ---------------------------------------------------------------------------------------

#[test]
fn rows_forbidden_per_physical_type() {
    let cases: [(u32, u32, &str, &str); 7] = [
        (pt::TRIPLES, row::QUAD, "quad", "triples"),
        (pt::TRIPLES, row::GRAPH_START, "graph_start", "triples"),
        (pt::TRIPLES, row::GRAPH_END, "graph_end", "triples"),
        (pt::QUADS, row::TRIPLE, "triple", "quads"),
        (pt::QUADS, row::GRAPH_START, "graph_start", "quads"),
        (pt::QUADS, row::GRAPH_END, "graph_end", "quads"),
        (pt::GRAPHS, row::QUAD, "quad", "graphs"),
    ];
    for (physical, field, row_name, phys_name) in cases {
        let body = match field {
            row::GRAPH_START => msg(&[(gs::G_DEFAULT, vec![])]),
            row::GRAPH_END => vec![],
            _ => msg(&[
                (st::S_IRI, iri(0, 1)),
                (st::P_IRI, iri(0, 2)),
                (st::O_IRI, iri(0, 3)),
                (st::G_DEFAULT, vec![]),
            ]),
        };
        let f = spo_names(F::new().options(&Opts::triples().physical(physical)))
            .row(field, &body)
            .build();
        let e = assert_err_at!(decode_err(&[f]), 0, 4, K::RowNotAllowed { .. });
        assert!(
            matches!(e.kind, K::RowNotAllowed { row: r, physical: p } if r == row_name && p == phys_name),
            "{e}"
        );
    }
}

#[test]
fn empty_row_is_rejected() {
    let f = F::new().options(&Opts::triples()).raw_row(&[]).build();
    assert_err_at!(decode_err(&[f]), 0, 1, K::EmptyRow);
    // Only an unknown field: still no oneof member.
    let mut unknown = Vec::new();
    put_uint_field(&mut unknown, 7, 1);
    let f = F::new().options(&Opts::triples()).raw_row(&unknown).build();
    assert_err_at!(decode_err(&[f]), 0, 1, K::EmptyRow);
}

#[test]
fn row_with_two_oneof_fields_is_rejected() {
    let mut r = Vec::new();
    put_bytes_field(&mut r, row::NAME, &entry_body(0, "http://ex/a"));
    put_bytes_field(&mut r, row::DATATYPE, &entry_body(0, "http://ex/dt"));
    let f = F::new().options(&Opts::triples()).raw_row(&r).build();
    assert_err_at!(decode_err(&[f]), 0, 1, K::MultipleRowFields(row::DATATYPE));
}

#[test]
fn statement_with_two_terms_in_one_position_is_rejected() {
    let f = spo_names(F::new().options(&Opts::triples()))
        .triple(&[
            (st::S_IRI, iri(0, 1)),
            (st::S_BNODE, b"b".to_vec()),
            (st::P_IRI, iri(0, 2)),
            (st::O_IRI, iri(0, 3)),
        ])
        .build();
    assert_err_at!(
        decode_err(&[f]),
        0,
        4,
        K::MultipleTermFields {
            position: "subject"
        }
    );
}

#[test]
fn error_display_names_frame_and_row() {
    let f0 = spo_names(F::new().options(&Opts::triples()))
        .triple(&spo_fields())
        .build();
    let f1 = F::new()
        .triple(&spo_fields())
        .triple(&spo_fields())
        .name(0, "http://ex/4")
        .triple(&[(st::S_IRI, iri(0, 7))])
        .build();
    let e = decode_err(&[f0, f1]);
    let s = e.to_string();
    assert!(s.starts_with("frame 1, row 3"), "{s}");
    assert!(s.contains("undefined name entry 7"), "{s}");
}

// ---------------------------------------------------------------------------------------
// Byte framing and delimiting autodetection (§8)
// ---------------------------------------------------------------------------------------

fn read_stream(
    bytes: &[u8],
    cfg: DecoderOptions,
    d: Delimiting,
) -> Result<Vec<Vec<Statement>>, DecodeError> {
    JellyReader::with_options(bytes, cfg, d).read_all_frames()
}

/// A non-delimited frame whose first row is 10 bytes long and starts with the options
/// field: it begins `0A 0A 0A`, the ambiguous case that must be read as non-delimited.
fn frame_starting_0a_0a_0a() -> Vec<u8> {
    // Options body of exactly 8 bytes: physical 1, name 8, prefix 0 (written), version 1.
    let opts = vec![0x10, 0x01, 0x48, 0x08, 0x50, 0x00, 0x78, 0x01];
    let mut r = Vec::new();
    put_bytes_field(&mut r, row::OPTIONS, &opts);
    assert_eq!(r.len(), 10);
    let f = F::new().raw_row(&r);
    spo_names(f).triple(&spo_fields()).build()
}

#[test]
fn detect_delimiting_rules() {
    assert_eq!(detect_delimiting(&[]), Delimiting::Delimited);
    assert_eq!(detect_delimiting(&[0x00]), Delimiting::Single);
    assert_eq!(detect_delimiting(&[0x2a, 0x00]), Delimiting::Single);
    assert_eq!(detect_delimiting(&[0x0a]), Delimiting::Single);
    assert_eq!(detect_delimiting(&[0x0a, 0x0a]), Delimiting::Single);
    assert_eq!(detect_delimiting(&[0x0a, 0x05]), Delimiting::Single);
    assert_eq!(detect_delimiting(&[0x0a, 0x0a, 0x0a]), Delimiting::Single);
    assert_eq!(
        detect_delimiting(&[0x0a, 0x0a, 0x08]),
        Delimiting::Delimited
    );
    assert_eq!(detect_delimiting(&[0x0a, 0x10, 0x0a]), Delimiting::Single);
    assert_eq!(
        detect_delimiting(&[0x2a, 0x0a, 0x0a]),
        Delimiting::Delimited
    );
    let f = frame_starting_0a_0a_0a();
    assert_eq!(&f[..3], &[0x0a, 0x0a, 0x0a]);
    assert_eq!(detect_delimiting(&f), Delimiting::Single);
}

#[test]
fn reader_on_ambiguous_0a_0a_0a_frame() {
    let f = frame_starting_0a_0a_0a();
    let frames = read_stream(&f, DecoderOptions::default(), Delimiting::Auto).unwrap();
    assert_eq!(frames, vec![vec![spo()]]);
    // The same bytes forced as delimited are garbage (a 10-byte frame of 0x0A…).
    assert!(read_stream(&f, DecoderOptions::default(), Delimiting::Delimited).is_err());
}

/// A delimited stream whose first frame is exactly 10 bytes long starts `0A 0A NN`
/// (NN = length of the first row, 8) and must be read as delimited.
#[test]
fn reader_on_delimited_stream_with_first_frame_of_ten_bytes() {
    let opts = vec![0x10, 0x01, 0x48, 0x08, 0x78, 0x01]; // 6 bytes
    let mut r = Vec::new();
    put_bytes_field(&mut r, row::OPTIONS, &opts);
    let f0 = F::new().raw_row(&r).build();
    assert_eq!(f0.len(), 10);
    let f1 = spo_names(F::new()).triple(&spo_fields()).build();
    let stream = delimited(&[f0, f1]);
    assert_eq!(&stream[..3], &[0x0a, 0x0a, 0x08]);
    let mut reader = JellyReader::new(&stream[..]);
    let frames = reader.read_all_frames().unwrap();
    assert_eq!(reader.delimiting(), Delimiting::Delimited);
    assert_eq!(frames, vec![vec![], vec![spo()]]);
}

#[test]
fn reader_on_tiny_inputs() {
    let d = DecoderOptions::default;
    // Empty input: a delimited stream of zero frames (no error, no statements)…
    assert_eq!(
        read_stream(&[], d(), Delimiting::Auto).unwrap(),
        Vec::<Vec<Statement>>::new()
    );
    // …but as a single non-delimited message it is an error.
    let e = read_stream(&[], d(), Delimiting::Single).unwrap_err();
    assert!(matches!(e.kind, K::EmptyInput), "{e}");
    // One byte 0x0A: non-delimited, a rows field with its length missing.
    let e = read_stream(&[0x0a], d(), Delimiting::Auto).unwrap_err();
    assert!(matches!(e.kind, K::Wire(_)), "{e}");
    // One or two bytes are read as non-delimited whatever they are, as Jelly-JVM and
    // pyjelly read them. One byte 0x00: a field tag of field 0, not valid protobuf.
    assert_eq!(detect_delimiting(&[0x00]), Delimiting::Single);
    let e = read_stream(&[0x00], d(), Delimiting::Auto).unwrap_err();
    assert!(matches!(e.kind, K::Wire(_)), "{e}");
    // One byte 0x05: read delimited on request, a 5-byte frame that is not there.
    let e = read_stream(&[0x05], d(), Delimiting::Delimited).unwrap_err();
    assert!(
        matches!(
            e.kind,
            K::TruncatedFrame {
                expected: 5,
                got: 0
            }
        ),
        "{e}"
    );
    assert_eq!(detect_delimiting(&[0x05, 0x0a]), Delimiting::Single);
    assert!(read_stream(&[0x05, 0x0a], d(), Delimiting::Auto).is_err());
    // Two bytes 0A 0A: truncated whichever way it is read.
    assert!(read_stream(&[0x0a, 0x0a], d(), Delimiting::Auto).is_err());
    assert!(read_stream(&[0x0a, 0x0a], d(), Delimiting::Delimited).is_err());
    // Two bytes 0A 00: a non-delimited frame with one empty row.
    let e = read_stream(&[0x0a, 0x00], d(), Delimiting::Auto).unwrap_err();
    assert!(matches!(e.kind, K::EmptyRow), "{e}");
}

fn small_stream() -> Vec<u8> {
    let mut out = Vec::new();
    let mut w = JellyWriterBuilder::new(StreamOptions::small())
        .frame_policy(jelly::FramePolicy::Rows(4))
        .build(&mut out)
        .unwrap();
    for k in 0..10 {
        let o = format!("http://ex/o{k}");
        w.add(StatementRef::triple(
            TermRef::Iri("http://ex/s"),
            TermRef::Iri("http://ex/p"),
            TermRef::Iri(&o),
        ))
        .unwrap();
    }
    w.finish().unwrap();
    out
}

#[test]
fn reader_truncated_length_varint_and_frame() {
    let d = DecoderOptions::default;
    // A length varint cut after its continuation byte (read as delimited: a lone byte
    // is autodetected as non-delimited, where it is a cut field tag).
    let e = read_stream(&[0x80], d(), Delimiting::Delimited).unwrap_err();
    assert!(matches!(e.kind, K::TruncatedFrame { .. }), "{e}");
    let e = read_stream(&[0x80], d(), Delimiting::Auto).unwrap_err();
    assert!(matches!(e.kind, K::Wire(_)), "{e}");
    let mut s = small_stream();
    let full = read_stream(&s, d(), Delimiting::Auto).unwrap();
    assert!(full.len() > 2);
    s.push(0x81); // a second length varint that never ends
    let e = read_stream(&s, d(), Delimiting::Auto).unwrap_err();
    assert!(matches!(e.kind, K::TruncatedFrame { .. }), "{e}");
    assert_eq!(e.frame, full.len() as u64);
    // Every strict prefix of a valid stream is either a clean frame boundary or an error.
    let s = small_stream();
    let mut boundaries = 0;
    for cut in 0..s.len() {
        match read_stream(&s[..cut], d(), Delimiting::Delimited) {
            Ok(frames) => {
                boundaries += 1;
                assert!(frames.len() < full.len());
                assert_eq!(frames[..], full[..frames.len()]);
            }
            Err(e) => assert!(
                matches!(e.kind, K::TruncatedFrame { .. }),
                "cut at {cut}: {e}"
            ),
        }
    }
    assert_eq!(boundaries, full.len());
}

/// A 5-byte input declaring a 1 GiB frame fails at once, without allocating 1 GiB.
#[test]
fn reader_huge_declared_frame_fails_fast() {
    let mut s = Vec::new();
    put_varint(&mut s, 1 << 30);
    assert_eq!(s.len(), 5);
    let start = Instant::now();
    let e = read_stream(&s, DecoderOptions::default(), Delimiting::Auto).unwrap_err();
    assert!(
        matches!(e.kind, K::FrameTooLarge { len, max } if len == 1 << 30 && max == 64 << 20),
        "{e}"
    );
    // Even with no frame limit, a short input is not buffered to the declared size.
    let cfg = DecoderOptions {
        max_frame_bytes: u64::MAX,
        ..Default::default()
    };
    let e = read_stream(&s, cfg.clone(), Delimiting::Auto).unwrap_err();
    assert!(
        matches!(e.kind, K::TruncatedFrame { expected, got: 0 } if expected == 1 << 30),
        "{e}"
    );
    // The largest varint: 2^64 - 1.
    let mut s = Vec::new();
    put_varint(&mut s, u64::MAX);
    let e = read_stream(&s, cfg, Delimiting::Auto).unwrap_err();
    assert!(matches!(e.kind, K::TruncatedFrame { .. }), "{e}");
    // An over-long varint.
    let e = read_stream(&[0xff; 11], DecoderOptions::default(), Delimiting::Auto).unwrap_err();
    assert!(matches!(e.kind, K::Wire(_)), "{e}");
    assert!(start.elapsed() < Duration::from_secs(2));
}

#[test]
fn reader_frame_limit_applies_to_both_framings() {
    let cfg = DecoderOptions {
        max_frame_bytes: 16,
        ..Default::default()
    };
    let s = small_stream();
    let e = read_stream(&s, cfg.clone(), Delimiting::Auto).unwrap_err();
    assert!(matches!(e.kind, K::FrameTooLarge { max: 16, .. }), "{e}");
    let f = frame_starting_0a_0a_0a();
    let e = read_stream(&f, cfg, Delimiting::Auto).unwrap_err();
    assert!(matches!(e.kind, K::FrameTooLarge { max: 16, .. }), "{e}");
}

/// The reader does not read the input to its end before decoding: an input that
/// would block forever after the first frame still yields the first frame.
#[test]
fn reader_streams_frame_by_frame() {
    struct Endless {
        head: Vec<u8>,
        pos: usize,
    }
    impl Read for Endless {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            if self.pos < self.head.len() {
                let n = (self.head.len() - self.pos).min(buf.len());
                buf[..n].copy_from_slice(&self.head[self.pos..self.pos + n]);
                self.pos += n;
                Ok(n)
            } else {
                Err(std::io::Error::other("no more data yet"))
            }
        }
    }
    let f0 = spo_names(F::new().options(&Opts::triples()))
        .triple(&spo_fields())
        .build();
    let mut r = JellyReader::new(Endless {
        head: delimited(&[f0]),
        pos: 0,
    });
    let mut frame = r.next_frame().unwrap().unwrap();
    let mut n = 0;
    while let Some(ev) = frame.next_event().unwrap() {
        if matches!(ev, Event::Statement(_)) {
            n += 1;
        }
    }
    assert_eq!(n, 1);
    assert!(matches!(
        r.next_frame().map(|_| ()).unwrap_err().kind,
        K::Io(_)
    ));
}

// ---------------------------------------------------------------------------------------
// Encoder refusals (to_jelly negatives, §13, §22)
// ---------------------------------------------------------------------------------------

fn typed(lex: &'static str, dt: &'static str) -> TermRef<'static> {
    TermRef::Literal(jelly::LiteralRef {
        lex,
        kind: jelly::LiteralKind::Typed(dt),
    })
}

const XSD_INT: &str = "http://www.w3.org/2001/XMLSchema#integer";

#[test]
fn encoder_refuses_typed_literal_without_datatype_table() {
    let mut enc = Encoder::new(StreamOptions::with_tables(8, 0, 0)).unwrap();
    let st = StatementRef::triple(
        TermRef::Iri("http://ex/s"),
        TermRef::Iri("http://ex/p"),
        typed("1", XSD_INT),
    );
    assert_eq!(
        enc.add(st),
        Err(EncodeError::DatatypeTableDisabled(XSD_INT.into()))
    );
    // Inside a quoted triple too.
    let inner = [
        TermRef::Iri("http://ex/s"),
        TermRef::Iri("http://ex/p"),
        typed("1", XSD_INT),
    ];
    let mut enc = Encoder::new(StreamOptions::with_tables(8, 0, 0).with_rdf_star(true)).unwrap();
    let st = StatementRef::triple(
        TermRef::Triple(TripleRef::from_terms(&inner)),
        TermRef::Iri("http://ex/p"),
        TermRef::Iri("http://ex/o"),
    );
    assert_eq!(
        enc.add(st),
        Err(EncodeError::DatatypeTableDisabled(XSD_INT.into()))
    );
    // xsd:string needs no datatype table: it is written as a simple literal.
    let st = StatementRef::triple(
        TermRef::Iri("http://ex/s"),
        TermRef::Iri("http://ex/p"),
        typed("x", jelly::term::XSD_STRING),
    );
    enc.add(st).unwrap();
    let f = enc.finish_frame();
    assert_eq!(
        statements(&[f]),
        vec![t(
            i("http://ex/s"),
            i("http://ex/p"),
            Term::simple_literal("x")
        )]
    );
}

#[test]
fn encoder_refuses_name_table_below_eight() {
    for n in [0, 7] {
        assert_eq!(
            Encoder::new(StreamOptions::with_tables(n, 0, 0)).unwrap_err(),
            EncodeError::NameTableTooSmall(n)
        );
        assert!(JellyWriter::new(Vec::new(), StreamOptions::with_tables(n, 16, 16)).is_err());
    }
    assert!(Encoder::new(StreamOptions::with_tables(8, 0, 0)).is_ok());
}

#[test]
fn encoder_refuses_unspecified_physical_type() {
    let o = StreamOptions::small().with_physical_type(PhysicalType::Unspecified);
    assert_eq!(
        Encoder::new(o).unwrap_err(),
        EncodeError::PhysicalTypeUnspecified
    );
}

#[test]
fn encoder_refuses_quoted_triple_without_rdf_star() {
    let inner = [
        TermRef::Iri("http://ex/s"),
        TermRef::Iri("http://ex/p"),
        TermRef::Iri("http://ex/o"),
    ];
    let qt = TermRef::Triple(TripleRef::from_terms(&inner));
    let mut enc = Encoder::new(StreamOptions::small()).unwrap();
    assert_eq!(
        enc.add(StatementRef::triple(
            qt,
            TermRef::Iri("http://ex/p"),
            TermRef::Iri("http://ex/o")
        )),
        Err(EncodeError::RdfStarNotEnabled("subject"))
    );
    assert_eq!(
        enc.add(StatementRef::triple(
            TermRef::Iri("http://ex/s"),
            TermRef::Iri("http://ex/p"),
            qt
        )),
        Err(EncodeError::RdfStarNotEnabled("object"))
    );
    // A quoted triple as predicate needs generalized statements as well.
    let mut enc = Encoder::new(StreamOptions::small().with_rdf_star(true)).unwrap();
    assert!(matches!(
        enc.add(StatementRef::triple(
            TermRef::Iri("http://ex/s"),
            qt,
            TermRef::Iri("http://ex/o")
        )),
        Err(EncodeError::GeneralizedNotEnabled {
            position: "predicate",
            ..
        })
    ));
}

/// There is no field for a quoted triple in the graph position of `RdfQuad` (the
/// graph oneof is iri / bnode / default / literal): the encoder must refuse it rather
/// than write something else.
#[test]
fn encoder_refuses_quoted_triple_as_graph() {
    let inner = [
        TermRef::Iri("http://ex/s"),
        TermRef::Iri("http://ex/p"),
        TermRef::Iri("http://ex/o"),
    ];
    let qt = TermRef::Triple(TripleRef::from_terms(&inner));
    for physical in [PhysicalType::Quads, PhysicalType::Graphs] {
        let o = StreamOptions::small()
            .with_physical_type(physical)
            .with_rdf_star(true)
            .with_generalized_statements(true);
        let mut enc = Encoder::new(o).unwrap();
        enc.add(spo().as_ref()).unwrap();
        let r = enc.add(StatementRef::quad(
            TermRef::Iri("http://ex/s"),
            TermRef::Iri("http://ex/p"),
            TermRef::Iri("http://ex/o"),
            qt,
        ));
        assert!(r.is_err(), "{physical:?}: quoted triple as graph accepted");
        enc.add(spo().as_ref()).unwrap();
        let f = enc.finish_frame();
        let d = spo();
        let d = q(d.subject, d.predicate, d.object, Term::DefaultGraph);
        assert_eq!(statements(&[f]), vec![d.clone(), d], "{physical:?}");
    }
}

#[test]
fn encoder_refuses_generalized_terms_without_flag() {
    let lit = TermRef::Literal(jelly::LiteralRef {
        lex: "x",
        kind: jelly::LiteralKind::Simple,
    });
    let mut enc = Encoder::new(StreamOptions::small()).unwrap();
    assert_eq!(
        enc.add(StatementRef::triple(
            lit,
            TermRef::Iri("http://ex/p"),
            TermRef::Iri("http://ex/o")
        )),
        Err(EncodeError::GeneralizedNotEnabled {
            kind: "literal",
            position: "subject"
        })
    );
    assert_eq!(
        enc.add(StatementRef::triple(
            TermRef::Iri("http://ex/s"),
            TermRef::BlankNode("b"),
            TermRef::Iri("http://ex/o")
        )),
        Err(EncodeError::GeneralizedNotEnabled {
            kind: "blank node",
            position: "predicate"
        })
    );
    let mut enc =
        Encoder::new(StreamOptions::small().with_physical_type(PhysicalType::Quads)).unwrap();
    assert_eq!(
        enc.add(StatementRef::quad(
            TermRef::Iri("http://ex/s"),
            TermRef::Iri("http://ex/p"),
            TermRef::Iri("http://ex/o"),
            lit
        )),
        Err(EncodeError::GeneralizedNotEnabled {
            kind: "literal",
            position: "graph"
        })
    );
}

/// Statements accepted before and after a refused one decode intact, for every kind of
/// refusal, including the ones only detected while encoding (a statement that needs more
/// distinct table entries than the table holds).
#[test]
fn refused_statement_leaves_stream_decodable() {
    let s = TermRef::Iri("http://ex/s");
    let p = TermRef::Iri("http://ex/p");
    let lit = TermRef::Literal(jelly::LiteralRef {
        lex: "x",
        kind: jelly::LiteralKind::Simple,
    });
    // Nine distinct names (prefix table 0) in one statement, name table 8.
    let names: Vec<String> = (0..9).map(|k| format!("http://ex/n{k}")).collect();
    let n = |k: usize| TermRef::Iri(&names[k]);
    let q1 = [n(0), n(1), n(2)];
    let q2 = [n(4), n(5), n(6)];
    let q3 = [n(7), n(8), TermRef::Triple(TripleRef::from_terms(&q2))];
    let too_many = StatementRef::triple(
        TermRef::Triple(TripleRef::from_terms(&q1)),
        n(3),
        TermRef::Triple(TripleRef::from_terms(&q3)),
    );
    let good_after = StatementRef::triple(TermRef::Triple(TripleRef::from_terms(&q1)), n(3), n(0));
    // Two datatypes in one statement, datatype table 1.
    let dq = [s, p, typed("1", XSD_INT)];
    let two_dt = StatementRef::triple(
        TermRef::Triple(TripleRef::from_terms(&dq)),
        p,
        typed("2", "http://ex/dt"),
    );
    let two_dt_after = StatementRef::triple(TermRef::Triple(TripleRef::from_terms(&dq)), p, s);

    for (prefix, datatype) in [(0, 1), (4, 1), (16, 0)] {
        let o = StreamOptions::with_tables(8, prefix, datatype).with_rdf_star(true);
        let mut out = Vec::new();
        let mut w = JellyWriterBuilder::new(o)
            .frame_policy(jelly::FramePolicy::Rows(5))
            .build(&mut out)
            .unwrap();
        let mut expected = Vec::new();
        let mut refused = 0;
        let mut add = |w: &mut JellyWriter<&mut Vec<u8>>, st: StatementRef<'_>| match w.add(st) {
            Ok(()) => expected.push(st.to_owned()),
            Err(_) => refused += 1,
        };
        add(
            &mut w,
            StatementRef::triple(s, p, TermRef::Iri("http://ex/o")),
        );
        add(&mut w, StatementRef::triple(lit, p, s)); // generalized: refused up front
        add(&mut w, StatementRef::triple(s, p, typed("5", XSD_INT)));
        add(&mut w, too_many);
        add(&mut w, good_after);
        add(&mut w, StatementRef::triple(s, p, n(1)));
        add(&mut w, two_dt);
        add(&mut w, two_dt_after);
        add(&mut w, StatementRef::triple(s, p, typed("6", XSD_INT)));
        add(&mut w, StatementRef::triple(n(3), n(4), n(5)));
        w.finish().unwrap();
        assert!(
            refused >= 3,
            "prefix {prefix} datatype {datatype}: {refused} refused"
        );
        let got: Vec<Statement> = JellyReader::new(&out[..])
            .read_all_frames()
            .unwrap_or_else(|e| panic!("prefix {prefix} datatype {datatype}: {e}"))
            .into_iter()
            .flatten()
            .collect();
        assert_eq!(got, expected, "prefix {prefix} datatype {datatype}");
    }
}

// ---------------------------------------------------------------------------------------
// Byte offsets of errors
// ---------------------------------------------------------------------------------------

/// A frame that decodes (options and the three names): put first, it makes the frame
/// with the fault start well into the input, where an offset within the frame or within
/// a sub-message differs from the offset in the input.
fn offset_head(version: u32) -> Vec<u8> {
    spo_names(F::new().options(&Opts::triples().version(version))).build()
}

/// The only position of `needle` in `hay`.
fn only_pos(hay: &[u8], needle: &[u8]) -> usize {
    let at: Vec<usize> = (0..=hay.len() - needle.len())
        .filter(|&i| hay[i..].starts_with(needle))
        .collect();
    assert_eq!(at.len(), 1, "{needle:02x?} in {hay:02x?}");
    at[0]
}

/// The wire error that reading `stream` ends with, and its offset.
fn wire_error(stream: &[u8]) -> (DecodeError, usize) {
    let e = JellyReader::new(stream).read_all_frames().unwrap_err();
    match &e.kind {
        K::Wire(w) => {
            let at = w.offset();
            (e, at)
        }
        _ => panic!("not a wire error: {e}"),
    }
}

/// A statement row body of raw bytes.
fn raw_triple(f: F, body: &[u8]) -> F {
    f.row(row::TRIPLE, body)
}

/// Every "at byte N" of a decoding error is the position in the input of the byte at
/// fault, wherever in the frame it lies (statement payload, term, literal, IRI, entry,
/// namespace, options, the frame itself, the length prefix).
#[test]
fn wire_error_offsets_are_positions_in_the_input() {
    // A lexical form long enough for the general literal path, cut by a lone surrogate.
    let mut long_lex = vec![b'a'; 150];
    long_lex.extend_from_slice(&[0xed, 0xa0, 0x80]);
    let mut long_lit = Vec::new();
    put_bytes_field(&mut long_lit, lit::LEX, &long_lex);
    let mut spo_long = spo_fields();
    spo_long[2] = (st::O_LITERAL, long_lit);

    let mut bad_bnode = spo_fields();
    bad_bnode[0] = (st::S_BNODE, vec![b'x', 0xfe, b'y']);

    // Field 20 with the group wire type (3) after the terms of a statement.
    let mut group = msg(&spo_fields());
    group.extend_from_slice(&[0xa3, 0x01, 0xa4, 0x01]);

    // A field key that is an over-long varint (11 bytes) in a statement.
    let mut long_key = msg(&spo_fields());
    long_key.extend_from_slice(&[0xff; 10]);
    long_key.push(0x01);

    // A subject IRI with a key of field 0 (varint) before its ids.
    let mut iri0 = spo_fields();
    iri0[0] = (st::S_IRI, vec![0x00, 0x07, 0x10, 0x01]);

    // A name entry with invalid UTF-8 in a value that is not in the usual shape.
    let mut entry = Vec::new();
    put_bytes_field(&mut entry, entry::VALUE, &[b'q', 0xc3, 0x28]);
    put_uint_field(&mut entry, entry::ID, 4);

    // A namespace name with invalid UTF-8.
    let ns_row = msg(&[(ns_f::NAME, vec![b'n', 0xf8]), (ns_f::VALUE, iri(0, 1))]);

    // A term field whose length runs past the statement (and the frame).
    let cut_term = vec![0x0a, 0x05, 0x08];

    /// Where the fault is: at the only occurrence of some bytes, or `n` bytes before
    /// the end of the input.
    enum Fault {
        At(Vec<u8>),
        BeforeEnd(usize),
    }
    let cases = [
        (
            "long literal",
            1,
            F::new().triple(&spo_long).build(),
            Fault::At(vec![0xed, 0xa0, 0x80]),
        ),
        (
            "blank node",
            1,
            F::new().triple(&bad_bnode).build(),
            Fault::At(vec![0xfe]),
        ),
        (
            "group in a statement",
            1,
            raw_triple(F::new(), &group).build(),
            Fault::At(vec![0xa3, 0x01]),
        ),
        (
            "over-long key in a statement",
            1,
            raw_triple(F::new(), &long_key).build(),
            Fault::At(vec![0xff; 10]),
        ),
        (
            "field 0 in an IRI",
            1,
            F::new().triple(&iri0).build(),
            Fault::At(vec![0x00, 0x07, 0x10]),
        ),
        (
            "name entry",
            1,
            F::new().row(row::NAME, &entry).build(),
            Fault::At(vec![0xc3, 0x28]),
        ),
        (
            "namespace name",
            2,
            F::new().row(row::NAMESPACE, &ns_row).build(),
            Fault::At(vec![0xf8]),
        ),
        (
            "term longer than its statement",
            1,
            raw_triple(F::new(), &cut_term).build(),
            Fault::BeforeEnd(0),
        ),
        (
            "row longer than its frame",
            1,
            vec![0x0a, 0x7f, 0x12, 0x00],
            Fault::BeforeEnd(0),
        ),
        ("frame field 0", 1, vec![0x02, 0x00], Fault::BeforeEnd(2)),
    ];
    for (what, version, frame, fault) in cases {
        let stream = delimited(&[offset_head(version), frame]);
        let expected = match fault {
            Fault::At(bytes) => only_pos(&stream, &bytes),
            Fault::BeforeEnd(n) => stream.len() - n,
        };
        let (e, got) = wire_error(&stream);
        assert_eq!(got, expected, "{what}: {e}");
        assert_eq!(e.frame, 1, "{what}: {e}");
        // The located row (or frame) starts at or before the byte at fault.
        assert!(e.offset.unwrap() <= got as u64, "{what}: {e}");
    }

    // A frame length prefix that overflows 64 bits (10th byte above 1), after a frame.
    let mut stream = delimited(&[offset_head(1)]);
    let prefix_at = stream.len();
    stream.extend_from_slice(&[0x80; 9]);
    stream.extend_from_slice(&[0x02, 0x0a]);
    let (e, got) = wire_error(&stream);
    assert_eq!(got, prefix_at, "{e}");
    assert_eq!(e.offset, Some(prefix_at as u64), "{e}");
}

/// A metadata key that is not UTF-8 is an error located in the input.
#[test]
fn metadata_key_error_offset_is_a_position_in_the_input() {
    let f1 = F::new().meta("ok", b"\xff\xfe").build();
    let mut bad = Vec::new();
    put_bytes_field(&mut bad, ff::MAP_KEY, b"k\x80");
    let mut f2 = Vec::new();
    put_bytes_field(&mut f2, ff::METADATA, &bad);
    let stream = delimited(&[offset_head(1), f1, f2]);
    let mut r = JellyReader::new(&stream[..]);
    let mut seen = Vec::new();
    while let Some(frame) = r.next_frame().unwrap() {
        seen.push(frame.metadata().map(|m| m.len()).map_err(|e| {
            let K::Wire(w) = &e.kind else { panic!("{e}") };
            (e.frame, w.offset())
        }));
    }
    let key_at = only_pos(&stream, b"k\x80") + 1;
    assert_eq!(seen, vec![Ok(0), Ok(1), Err((2, key_at))]);
}

/// Field number 0 is not a protobuf field: refused inside a statement as it is in the
/// frame, the row and every term, whatever its wire type, in triples, quads and quoted
/// triples.
#[test]
fn field_zero_in_a_statement_is_rejected() {
    let quad_opts = Opts::triples().physical(pt::QUADS);
    let mut quad = spo_fields();
    quad.push((st::G_IRI, iri(0, 1)));
    let star = Opts::triples().star();
    for key in [vec![0x02, 0x00], vec![0x00, 0x00], vec![0x05, 1, 2, 3, 4]] {
        for (opts, row_field, fields) in [
            (Opts::triples(), row::TRIPLE, spo_fields()),
            (quad_opts.clone(), row::QUAD, quad.clone()),
        ] {
            // Field 0 first, then a complete statement (which alone decodes).
            let mut body = key.clone();
            body.extend_from_slice(&msg(&fields));
            let f = spo_names(F::new().options(&opts)).row(row_field, &body);
            let e = assert_err_at!(
                decode_err(&[f.build()]),
                0,
                4,
                K::Wire(jelly_proto::wire::WireError::ZeroField(_))
            );
            let f = spo_names(F::new().options(&opts)).row(row_field, &msg(&fields));
            assert_eq!(decode(&[f.build()]).unwrap().len(), 2, "{e}");
        }
        // Inside a quoted triple.
        let mut inner = key.clone();
        inner.extend_from_slice(&msg(&spo_fields()));
        let f = spo_names(F::new().options(&star)).triple(&[
            (st::S_TRIPLE, inner),
            (st::P_IRI, iri(0, 2)),
            (st::O_IRI, iri(0, 3)),
        ]);
        assert_err_at!(
            decode_err(&[f.build()]),
            0,
            4,
            K::Wire(jelly_proto::wire::WireError::ZeroField(_))
        );
    }
}

// ---------------------------------------------------------------------------------------
// Large tables with few entries
// ---------------------------------------------------------------------------------------

/// Entries of high id in large tables (which a decoder keeps apart from the table's
/// slots until enough lower ids are set) resolve like any other, before and after
/// the lower ids fill in, and changing them changes the IRIs built from them (no stale
/// cached IRI).
#[test]
fn entries_of_high_id_resolve_and_change() {
    let cfg = DecoderOptions {
        max_name_table_size: 100_000,
        max_prefix_table_size: 100_000,
        ..Default::default()
    };
    let opts = Opts::triples().tables(100_000, 100_000, 4);
    let far = |p: u32, n: u32| {
        vec![
            (st::S_IRI, iri(p, n)),
            (st::P_IRI, iri(p, n)),
            (st::O_IRI, iri(p, n)),
        ]
    };
    // A prefix and a name far out, used twice.
    let f0 = F::new()
        .options(&opts)
        .prefix(50_000, "http://a/")
        .name(60_000, "x")
        .triple(&far(50_000, 60_000))
        .triple(&far(0, 60_000))
        .build();
    // Enough lower ids for the tables' slots to reach them, then the same IRI.
    let mut f1 = F::new();
    for k in 1..=20_000u32 {
        f1 = f1.name(k, &format!("n{k}"));
    }
    for k in 1..=15_000u32 {
        f1 = f1.prefix(k, &format!("http://p{k}/"));
    }
    let f1 = f1.triple(&far(50_000, 60_000)).build();
    // Then each entry changed in turn.
    let f2 = F::new()
        .prefix(50_000, "http://b/")
        .triple(&far(50_000, 60_000))
        .name(60_000, "y")
        .triple(&far(50_000, 60_000))
        .triple(&far(7, 9))
        .build();
    let got: Vec<Statement> = decode_with(cfg, &[f0, f1, f2])
        .unwrap()
        .into_iter()
        .filter_map(|e| match e {
            Ev::St(s) => Some(s),
            _ => None,
        })
        .collect();
    let all = |x: &str| t(i(x), i(x), i(x));
    assert_eq!(
        got,
        vec![
            all("http://a/x"),
            all("http://a/x"),
            all("http://a/x"),
            all("http://b/x"),
            all("http://b/y"),
            all("http://p7/n9"),
        ]
    );
}

/// A prefix table smaller than the prefixes one row needs (1 to 3 entries for a quad of
/// four different prefixes) still encodes every row: IRIs are written whole, as names
/// under the empty prefix. Larger tables split them. All decode to the same statements.
#[test]
fn small_prefix_tables_encode_rows_of_more_prefixes() {
    let quad = |k: usize| {
        q(
            i(&format!("http://a.example/s{k}")),
            i(&format!("http://b.example/p{k}")),
            i(&format!("http://c.example/o{k}")),
            i(&format!("http://d.example/g{k}")),
        )
    };
    let input: Vec<Statement> = (0..40).map(quad).collect();
    for prefixes in [1, 2, 3, 4, 16] {
        let opts = StreamOptions::with_tables(8, prefixes, 0)
            .with_physical_type(jelly::PhysicalType::Quads);
        let mut enc = Encoder::new(opts).unwrap();
        let mut frames = Vec::new();
        for (k, s) in input.iter().enumerate() {
            enc.add(s.as_ref())
                .unwrap_or_else(|e| panic!("prefix table {prefixes}, quad {k}: {e}"));
            if k % 7 == 6 {
                frames.push(enc.finish_frame());
            }
        }
        frames.push(enc.finish_frame());
        assert_eq!(statements(&frames), input, "prefix table {prefixes}");
    }
    // The limit that stays: a table of 4 or more is split by, and a row of more
    // distinct prefixes than it holds (possible with quoted triples) is refused.
    let star = StreamOptions::with_tables(16, 4, 0).with_rdf_star(true);
    let mut enc = Encoder::new(star).unwrap();
    let five = t(
        quoted(
            i("http://a.example/x"),
            i("http://b.example/y"),
            i("http://c.example/z"),
        ),
        i("http://d.example/p"),
        i("http://e.example/o"),
    );
    assert!(matches!(
        enc.add(five.as_ref()),
        Err(EncodeError::TableTooSmallForRow {
            table: Table::Prefix,
            size: 4
        })
    ));
}
