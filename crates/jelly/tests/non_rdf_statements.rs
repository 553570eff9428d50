//! `Decoder::non_rdf_statement`: the decoder flags the statements that hold terms RDF
//! does not allow (relative IRIs; literals typed with a relative IRI, `rdf:langString` or
//! `rdf:dirLangString`) from checks it makes once per IRI it builds and per datatype
//! entry, not per statement. Its answer must be what checking the statement's terms
//! says, however the IRIs came about: a prefix and a name that make a scheme only
//! together, entries replaced mid-stream (the same ids then build another IRI), the
//! delta rules, repeated terms, quoted triples, graphs, entries out of the tables'
//! slots. Streams are written row by row with the wire primitives.

use jelly::term::{RDF_DIR_LANG_STRING, RDF_LANG_STRING, is_absolute_iri, needs_language_tag};
use jelly::{Decoder, DecoderOptions, Event, LiteralKind, StatementRef, TermRef};
use jelly_proto::fields::{
    entry, frame as ff, graph_start as gs, iri as iri_f, literal as lit, options as of,
    physical_type as pt, row, statement as st,
};
use jelly_proto::wire::{WireType, put_bytes_field, put_tag, put_uint_field, put_varint};

const XSD_INT: &str = "http://www.w3.org/2001/XMLSchema#int";

// ---------------------------------------------------------------------------------------
// The reference: every term checked
// ---------------------------------------------------------------------------------------

fn term_not_rdf(t: TermRef<'_>) -> bool {
    match t {
        TermRef::Iri(i) => !is_absolute_iri(i),
        TermRef::Literal(l) => match l.kind {
            LiteralKind::Typed(dt) => needs_language_tag(dt) || !is_absolute_iri(dt),
            _ => false,
        },
        TermRef::Triple(q) => (0..3).any(|i| term_not_rdf(q.term(i))),
        _ => false,
    }
}

fn statement_not_rdf(s: StatementRef<'_>) -> bool {
    [s.subject, s.predicate, s.object]
        .into_iter()
        .chain(s.graph)
        .any(term_not_rdf)
}

// ---------------------------------------------------------------------------------------
// Stream builder
// ---------------------------------------------------------------------------------------

/// `RdfIri{prefix_id, name_id}` (0 = field absent).
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

/// A typed literal: lexical form then datatype (the decoder's fast path), or the
/// datatype first (its general path).
fn typed(lex: &str, dt: u32, datatype_first: bool) -> Vec<u8> {
    let mut b = Vec::new();
    if !datatype_first {
        put_bytes_field(&mut b, lit::LEX, lex.as_bytes());
    }
    put_tag(&mut b, lit::DATATYPE, WireType::Varint);
    put_varint(&mut b, dt.into());
    if datatype_first {
        put_bytes_field(&mut b, lit::LEX, lex.as_bytes());
    }
    b
}

fn lang(lex: &str, tag: &str) -> Vec<u8> {
    msg(&[
        (lit::LEX, lex.as_bytes().to_vec()),
        (lit::LANGTAG, tag.as_bytes().to_vec()),
    ])
}

/// Rows of one stream, cut into frames where asked.
#[derive(Default)]
struct Stream {
    frames: Vec<Vec<u8>>,
    cur: Vec<u8>,
}

impl Stream {
    /// A stream whose options row asks for `physical` and these table sizes (RDF-star on).
    fn new(physical: u32, names: u32, prefixes: u32, datatypes: u32) -> Self {
        let mut o = Vec::new();
        put_uint_field(&mut o, of::PHYSICAL_TYPE, physical.into());
        put_uint_field(&mut o, of::RDF_STAR, 1);
        put_uint_field(&mut o, of::MAX_NAME_TABLE_SIZE, names.into());
        put_uint_field(&mut o, of::MAX_PREFIX_TABLE_SIZE, prefixes.into());
        put_uint_field(&mut o, of::MAX_DATATYPE_TABLE_SIZE, datatypes.into());
        put_uint_field(&mut o, of::VERSION, 1);
        let mut s = Stream::default();
        s.row(row::OPTIONS, &o);
        s
    }
    fn row(&mut self, field: u32, body: &[u8]) -> &mut Self {
        let mut r = Vec::new();
        put_bytes_field(&mut r, field, body);
        put_bytes_field(&mut self.cur, ff::ROWS, &r);
        self
    }
    fn entry(&mut self, field: u32, id: u32, value: &str) -> &mut Self {
        let mut b = Vec::new();
        put_uint_field(&mut b, entry::ID, id.into());
        put_bytes_field(&mut b, entry::VALUE, value.as_bytes());
        self.row(field, &b)
    }
    fn name(&mut self, id: u32, v: &str) -> &mut Self {
        self.entry(row::NAME, id, v)
    }
    fn prefix(&mut self, id: u32, v: &str) -> &mut Self {
        self.entry(row::PREFIX, id, v)
    }
    fn datatype(&mut self, id: u32, v: &str) -> &mut Self {
        self.entry(row::DATATYPE, id, v)
    }
    fn triple(&mut self, fields: &[(u32, Vec<u8>)]) -> &mut Self {
        self.row(row::TRIPLE, &msg(fields))
    }
    fn quad(&mut self, fields: &[(u32, Vec<u8>)]) -> &mut Self {
        self.row(row::QUAD, &msg(fields))
    }
    /// Ends the current frame.
    fn cut(&mut self) -> &mut Self {
        if !self.cur.is_empty() {
            self.frames.push(std::mem::take(&mut self.cur));
        }
        self
    }
    fn frames(&mut self) -> Vec<Vec<u8>> {
        self.cut();
        std::mem::take(&mut self.frames)
    }
}

/// Each statement of the stream (as N-Quads, for messages) and the decoder's flag,
/// checked against the reference on the way.
fn flags_with(cfg: DecoderOptions, frames: &[Vec<u8>]) -> Vec<(String, bool)> {
    let mut dec = Decoder::new(cfg);
    let mut out = Vec::new();
    for (i, f) in frames.iter().enumerate() {
        let mut frame = dec.frame(f);
        loop {
            let (text, want) = match frame.next_event() {
                Ok(Some(Event::Statement(s))) => (s.to_string(), statement_not_rdf(s)),
                Ok(Some(_)) => continue,
                Ok(None) => break,
                Err(e) => panic!("frame {i}: {e} (after {out:?})"),
            };
            let got = frame.decoder().non_rdf_statement();
            // What it hands back is the statement itself.
            if let Some(again) = got {
                assert_eq!(again.to_string(), text);
            }
            assert_eq!(got.is_some(), want, "{text}");
            out.push((text, got.is_some()));
        }
    }
    out
}

fn flags(frames: &[Vec<u8>]) -> Vec<bool> {
    flags_with(DecoderOptions::default(), frames)
        .into_iter()
        .map(|(_, f)| f)
        .collect()
}

/// `s p o` with the three IRIs given as (prefix id, name id).
fn spo(s: (u32, u32), p: (u32, u32), o: (u32, u32)) -> Vec<(u32, Vec<u8>)> {
    vec![
        (st::S_IRI, iri(s.0, s.1)),
        (st::P_IRI, iri(p.0, p.1)),
        (st::O_IRI, iri(o.0, o.1)),
    ]
}

// ---------------------------------------------------------------------------------------
// Hand-made cases
// ---------------------------------------------------------------------------------------

#[test]
fn a_prefix_replaced_mid_stream_makes_the_same_ids_another_iri() {
    let mut s = Stream::new(pt::TRIPLES, 8, 4, 4);
    s.prefix(1, "http://ex.org/")
        .prefix(2, "http://ex.org/")
        .name(1, "a")
        .name(2, "p")
        .triple(&spo((1, 1), (1, 2), (1, 1)))
        // The same ids, now relative: the IRIs built from prefix 1 are built again.
        .prefix(1, "rel/")
        .triple(&spo((1, 1), (2, 2), (2, 1)))
        .cut()
        .triple(&spo((2, 1), (2, 2), (1, 2)))
        // And back: absolute again.
        .prefix(1, "urn:x:")
        .triple(&spo((1, 1), (1, 2), (1, 1)));
    assert_eq!(flags(&s.frames()), [false, true, true, false]);
}

#[test]
fn a_scheme_made_by_prefix_and_name_together_is_absolute() {
    let mut s = Stream::new(pt::TRIPLES, 8, 4, 4);
    s.prefix(1, "ht")
        .prefix(2, "rel")
        .prefix(3, "http://ex.org/")
        .name(1, "tp://x")
        .name(2, "p:y")
        .name(3, "/z")
        .name(4, "a")
        // "http://x", "relp:y", "reltp://x": neither part has a scheme alone.
        .triple(&spo((1, 1), (2, 2), (2, 1)))
        // "ht/z": relative, although a name with this prefix made an absolute IRI.
        .triple(&spo((1, 3), (3, 4), (3, 4)))
        // "http://ex.org/tp://x": absolute whatever the name.
        .triple(&spo((3, 1), (3, 3), (3, 2)))
        // The name replaced: "ht" + "tp:" is absolute, "ht" + "tp" is not.
        .name(1, "tp:")
        .triple(&spo((1, 1), (3, 4), (3, 4)))
        .name(1, "tp")
        .triple(&spo((1, 1), (3, 4), (3, 4)));
    assert_eq!(flags(&s.frames()), [false, true, false, false, true]);
}

#[test]
fn delta_rules_and_repeated_terms_keep_the_flag_of_the_term_they_stand_for() {
    // No prefix table: names are whole IRIs, prefix id 0 means no prefix.
    let mut s = Stream::new(pt::TRIPLES, 8, 0, 4);
    s.name(0, "http://ex.org/s")
        .name(0, "http://ex.org/p")
        .name(0, "rel")
        .triple(&spo((0, 1), (0, 2), (0, 1)))
        // Name id 0: the previous name id + 1 (here 3, "rel").
        .triple(&[(st::S_IRI, iri(0, 2)), (st::O_IRI, iri(0, 0))])
        // Subject and predicate repeated; the object is absolute again.
        .triple(&[(st::O_IRI, iri(0, 1))])
        // A relative subject, then repeated twice.
        .triple(&spo((0, 3), (0, 2), (0, 1)))
        .triple(&[(st::P_IRI, iri(0, 2))])
        .cut()
        .triple(&[(st::O_IRI, iri(0, 2))])
        .triple(&[(st::S_IRI, iri(0, 1))]);
    assert_eq!(
        flags(&s.frames()),
        [false, true, false, true, true, true, false]
    );
}

#[test]
fn literal_datatypes_are_checked_per_entry_and_again_when_replaced() {
    let mut s = Stream::new(pt::TRIPLES, 8, 0, 8);
    s.name(0, "http://ex.org/s")
        .name(0, "http://ex.org/p")
        .datatype(1, XSD_INT)
        .datatype(2, RDF_LANG_STRING)
        .datatype(3, RDF_DIR_LANG_STRING)
        .datatype(4, "rel-dt");
    let with = |o: Vec<u8>| {
        vec![
            (st::S_IRI, iri(0, 1)),
            (st::P_IRI, iri(0, 2)),
            (st::O_LITERAL, o),
        ]
    };
    for first in [false, true] {
        for dt in 1..=4 {
            s.triple(&with(typed("1", dt, first)));
        }
    }
    s.triple(&with(lang("x", "en")))
        .triple(&with(msg(&[(lit::LEX, b"x".to_vec())])))
        // Replaced: 1 is no longer RDF, 2 is.
        .datatype(1, RDF_LANG_STRING)
        .datatype(2, "urn:dt")
        .triple(&with(typed("1", 1, false)))
        .triple(&with(typed("1", 2, false)))
        .triple(&with(typed("1", 1, true)))
        .triple(&with(typed("1", 2, true)));
    let got = flags(&s.frames());
    let mut want = [false, true, true, true].repeat(2);
    want.extend([false, false, true, false, true, false]);
    assert_eq!(got, want);
}

#[test]
fn quoted_triples_graphs_and_quads_are_searched() {
    let quoted = |s: (u32, u32), o: Vec<u8>| {
        msg(&[
            (st::S_IRI, iri(s.0, s.1)),
            (st::P_IRI, iri(0, 2)),
            (st::O_LITERAL, o),
        ])
    };
    let plain = msg(&[(lit::LEX, b"x".to_vec())]);
    let mut s = Stream::new(pt::TRIPLES, 8, 0, 4);
    s.name(0, "http://ex.org/s")
        .name(0, "http://ex.org/p")
        .name(0, "rel")
        .datatype(1, RDF_LANG_STRING);
    let nested = msg(&[
        (st::S_TRIPLE, quoted((0, 3), plain.clone())),
        (st::P_IRI, iri(0, 2)),
        (st::O_IRI, iri(0, 1)),
    ]);
    for subject in [
        quoted((0, 1), plain.clone()),
        quoted((0, 3), plain.clone()),
        quoted((0, 1), typed("x", 1, false)),
        nested,
    ] {
        s.triple(&[
            (st::S_TRIPLE, subject),
            (st::P_IRI, iri(0, 2)),
            (st::O_IRI, iri(0, 1)),
        ]);
    }
    assert_eq!(flags(&s.frames()), [false, true, true, true]);

    // Quads: the graph is a term of the statement.
    let mut s = Stream::new(pt::QUADS, 8, 0, 4);
    s.name(0, "http://ex.org/s")
        .name(0, "http://ex.org/p")
        .name(0, "rel")
        .quad(&[
            (st::S_IRI, iri(0, 1)),
            (st::P_IRI, iri(0, 2)),
            (st::O_IRI, iri(0, 1)),
            (st::G_IRI, iri(0, 3)),
        ])
        .quad(&[(st::G_DEFAULT, Vec::new())])
        .quad(&[(st::G_IRI, iri(0, 1))])
        .quad(&[(st::O_IRI, iri(0, 3))]);
    assert_eq!(flags(&s.frames()), [true, false, false, true]);

    // GRAPHS: so is the open graph.
    let mut s = Stream::new(pt::GRAPHS, 8, 0, 4);
    s.name(0, "http://ex.org/s")
        .name(0, "http://ex.org/p")
        .name(0, "rel")
        .row(row::GRAPH_START, &msg(&[(gs::G_IRI, iri(0, 3))]))
        .triple(&spo((0, 1), (0, 2), (0, 1)))
        .row(row::GRAPH_END, &[])
        .row(row::GRAPH_START, &msg(&[(gs::G_IRI, iri(0, 1))]))
        .triple(&spo((0, 1), (0, 2), (0, 1)))
        .row(row::GRAPH_END, &[])
        .row(row::GRAPH_START, &msg(&[(gs::G_DEFAULT, Vec::new())]))
        .triple(&spo((0, 1), (0, 2), (0, 1)));
    assert_eq!(flags(&s.frames()), [true, false, false]);
}

/// A decoder reused for another stream starts from that stream's entries: a relative
/// graph left by a GRAPHS stream says nothing about the TRIPLES stream after it.
#[test]
fn a_reset_decoder_judges_the_next_stream_alone() {
    let mut a = Stream::new(pt::GRAPHS, 8, 0, 4);
    a.name(0, "rel")
        .name(0, "http://ex.org/p")
        .row(row::GRAPH_START, &msg(&[(gs::G_IRI, iri(0, 1))]))
        .triple(&spo((0, 2), (0, 2), (0, 2)));
    let mut b = Stream::new(pt::TRIPLES, 8, 0, 4);
    b.name(0, "http://ex.org/s")
        .name(0, "http://ex.org/p")
        .triple(&spo((0, 1), (0, 2), (0, 1)));
    let mut dec = Decoder::default();
    let mut got = Vec::new();
    for stream in [a.frames(), b.frames()] {
        dec.reset();
        for f in &stream {
            let mut frame = dec.frame(f);
            while let Some(ev) = frame.next_event().unwrap() {
                if matches!(ev, Event::Statement(_)) {
                    got.push(frame.decoder().non_rdf_statement().is_some());
                }
            }
        }
    }
    assert_eq!(got, [true, false]);
}

/// Entries whose ids lie beyond the slots a table keeps (under raised limits) are
/// held aside: an IRI made of one is not cached, and a datatype's check is made per
/// literal. One held aside and later moved into the grown slots is checked too.
#[test]
fn entries_out_of_the_slots_are_checked_as_well() {
    let cfg = DecoderOptions {
        max_name_table_size: 100_000,
        max_datatype_table_size: 100_000,
        ..DecoderOptions::default()
    };
    let mut s = Stream::new(pt::TRIPLES, 100_000, 0, 100_000);
    s.name(1, "http://ex.org/s")
        .name(2, "http://ex.org/p")
        .name(50_000, "rel")
        .datatype(50_000, RDF_LANG_STRING)
        .triple(&spo((0, 50_000), (0, 2), (0, 1)))
        .triple(&[
            (st::S_IRI, iri(0, 1)),
            (st::O_LITERAL, typed("x", 50_000, false)),
        ]);
    // Enough datatype entries for the slots to grow past 50,000 (at least a quarter
    // of them in use), then one beyond, which grows the per-entry checks over 50,000.
    for id in 1..=15_000 {
        s.datatype(id, XSD_INT);
    }
    s.datatype(50_001, XSD_INT)
        .triple(&[(st::O_LITERAL, typed("x", 50_000, false))])
        .triple(&[(st::O_LITERAL, typed("x", 50_001, false))])
        .triple(&[(st::O_LITERAL, typed("x", 7, true))]);
    let got: Vec<bool> = flags_with(cfg, &s.frames())
        .into_iter()
        .map(|(_, f)| f)
        .collect();
    assert_eq!(got, [true, true, true, false, false]);
}

// ---------------------------------------------------------------------------------------
// Random streams
// ---------------------------------------------------------------------------------------

/// xorshift64*: a fixed sequence per seed, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u32) -> u32 {
        (self.next() >> 33) as u32 % n
    }
    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[self.below(from.len() as u32) as usize]
    }
    fn chance(&mut self, percent: u32) -> bool {
        self.below(100) < percent
    }
}

/// Prefixes and names that make absolute IRIs alone, together, or not at all.
const PREFIXES: &[&str] = &[
    "http://ex.org/",
    "ht",
    "h",
    "rel",
    "rel/",
    "urn",
    "urn:x:",
    "1a",
    "#",
    "a+b",
    ".a",
    "x-",
];
const NAMES: &[&str] = &[
    "a", "tp://x", "tp:y", ":z", "/p", "b", "p:q", "", "1:", "%41:b", "#f", "s.t:u",
];
const DATATYPES: &[&str] = &[
    XSD_INT,
    RDF_LANG_STRING,
    RDF_DIR_LANG_STRING,
    "rel-dt",
    "urn:dt",
    "x:",
    "9:x",
];

const NAMES_MAX: u32 = 8;
const PREFIXES_MAX: u32 = 4;
const DATATYPES_MAX: u32 = 4;

/// Writes random valid terms, following the decoder's name id delta state.
struct Gen {
    rng: Rng,
    last_name: u32,
}

impl Gen {
    fn iri(&mut self) -> Vec<u8> {
        let pid = self.rng.below(PREFIXES_MAX + 1);
        // Name id 0 means the previous one + 1: only while that stays in the table.
        let nid = if self.last_name < NAMES_MAX && self.rng.chance(20) {
            self.last_name += 1;
            0
        } else {
            let n = 1 + self.rng.below(NAMES_MAX);
            self.last_name = n;
            n
        };
        iri(pid, nid)
    }
    fn literal(&mut self) -> Vec<u8> {
        match self.rng.below(4) {
            0 => msg(&[(lit::LEX, b"x".to_vec())]),
            1 => lang("x", "en"),
            _ => {
                let dt = 1 + self.rng.below(DATATYPES_MAX);
                let first = self.rng.chance(30);
                typed("v", dt, first)
            }
        }
    }
    /// A quoted triple `depth` levels deep at most.
    fn quoted(&mut self, depth: u32) -> Vec<u8> {
        let s = self.subject(depth);
        let p = (st::P_IRI, self.iri());
        let o = self.object(depth);
        msg(&[s, p, o])
    }
    fn subject(&mut self, depth: u32) -> (u32, Vec<u8>) {
        match self.rng.below(6) {
            0 => (st::S_BNODE, b"b0".to_vec()),
            1 if depth > 0 => (st::S_TRIPLE, self.quoted(depth - 1)),
            _ => (st::S_IRI, self.iri()),
        }
    }
    fn object(&mut self, depth: u32) -> (u32, Vec<u8>) {
        match self.rng.below(8) {
            0 => (st::O_BNODE, b"b1".to_vec()),
            1 if depth > 0 => (st::O_TRIPLE, self.quoted(depth - 1)),
            2..=4 => (st::O_LITERAL, self.literal()),
            _ => (st::O_IRI, self.iri()),
        }
    }
    fn graph(&mut self) -> (u32, Vec<u8>) {
        match self.rng.below(4) {
            0 => (st::G_BNODE, b"g".to_vec()),
            1 => (st::G_DEFAULT, Vec::new()),
            _ => (st::G_IRI, self.iri()),
        }
    }
}

/// A random stream of `physical` type: every entry set at first, then statements
/// (positions left out at random, as repeated terms) and entries replaced among them.
fn random_stream(seed: u64, physical: u32) -> Vec<Vec<u8>> {
    let mut g = Gen {
        rng: Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1),
        last_name: 0,
    };
    let mut s = Stream::new(physical, NAMES_MAX, PREFIXES_MAX, DATATYPES_MAX);
    for id in 1..=NAMES_MAX {
        s.name(id, g.rng.pick(NAMES));
    }
    for id in 1..=PREFIXES_MAX {
        s.prefix(id, g.rng.pick(PREFIXES));
    }
    for id in 1..=DATATYPES_MAX {
        s.datatype(id, g.rng.pick(DATATYPES));
    }
    let mut first = true;
    for _ in 0..300 {
        match g.rng.below(20) {
            0 => {
                s.name(1 + g.rng.below(NAMES_MAX), g.rng.pick(NAMES));
            }
            1 => {
                s.prefix(1 + g.rng.below(PREFIXES_MAX), g.rng.pick(PREFIXES));
            }
            2 => {
                s.datatype(1 + g.rng.below(DATATYPES_MAX), g.rng.pick(DATATYPES));
            }
            3 => {
                s.cut();
            }
            _ => {
                // In S, P, O, G order, which is the order the decoder resolves them in
                // (the name id delta state follows it).
                let mut fields = Vec::new();
                if first || g.rng.chance(70) {
                    fields.push(g.subject(2));
                }
                if first || g.rng.chance(70) {
                    fields.push((st::P_IRI, g.iri()));
                }
                if first || g.rng.chance(80) {
                    fields.push(g.object(2));
                }
                if physical == pt::QUADS {
                    if first || g.rng.chance(50) {
                        fields.push(g.graph());
                    }
                    s.quad(&fields);
                } else {
                    s.triple(&fields);
                }
                first = false;
            }
        }
    }
    s.frames()
}

#[test]
fn random_streams_are_flagged_as_checking_every_term_would() {
    let (mut flagged, mut clean) = (0, 0);
    for seed in 0..60 {
        for physical in [pt::TRIPLES, pt::QUADS] {
            for (_, f) in flags_with(DecoderOptions::default(), &random_stream(seed, physical)) {
                if f {
                    flagged += 1;
                } else {
                    clean += 1;
                }
            }
        }
    }
    // Both answers are common, so both kinds of mistake would show.
    assert!(flagged > 2_000 && clean > 2_000, "{flagged} / {clean}");
}
