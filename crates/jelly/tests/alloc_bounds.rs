//! The decoder's allocations, counted by a global allocator that keeps per-thread
//! tallies (each test runs on a thread of its own):
//! - the borrowed path (`for_each_statement`) does not allocate per statement;
//! - a hostile stream cannot multiply a frame's bytes through the IRI cache (one long
//!   prefix copied into the cached IRI of every name id) or through quoted triples
//!   (the same long IRIs at every nesting level).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::path::PathBuf;

use jelly::{
    DecodeErrorKind, DecoderOptions, Delimiting, JellyReader, JellyWriterBuilder, Statement,
    StatementRef, StreamOptions, Term, TermRef, Triple,
};

struct Counting;

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
    static LIVE: Cell<i64> = const { Cell::new(0) };
    static PEAK: Cell<i64> = const { Cell::new(0) };
}

fn note(grow: i64, allocates: bool) {
    // `try_with`: the allocator also runs while a thread's locals are torn down.
    let _ = LIVE.try_with(|live| {
        let now = live.get() + grow;
        live.set(now);
        let _ = PEAK.try_with(|p| p.set(p.get().max(now)));
    });
    if allocates {
        let _ = ALLOCS.try_with(|a| a.set(a.get() + 1));
    }
}

// SAFETY: every call is passed on to the system allocator unchanged; the counters are
// plain thread-local cells that never allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        note(l.size() as i64, true);
        // SAFETY: the caller's layout, as `GlobalAlloc::alloc` requires.
        unsafe { System.alloc(l) }
    }

    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        note(l.size() as i64, true);
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(l) }
    }

    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        note(-(l.size() as i64), false);
        // SAFETY: `p` came from this allocator with layout `l`.
        unsafe { System.dealloc(p, l) }
    }

    unsafe fn realloc(&self, p: *mut u8, l: Layout, new_size: usize) -> *mut u8 {
        note(new_size as i64 - l.size() as i64, true);
        // SAFETY: `p` came from this allocator with layout `l`.
        unsafe { System.realloc(p, l, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations made and peak live bytes above the start while `f` runs on this thread.
fn measure<T>(f: impl FnOnce() -> T) -> (T, u64, i64) {
    let a0 = ALLOCS.with(Cell::get);
    let live0 = LIVE.with(Cell::get);
    PEAK.with(|p| p.set(live0));
    let r = f();
    let allocs = ALLOCS.with(Cell::get) - a0;
    let peak = PEAK.with(Cell::get) - live0;
    (r, allocs, peak)
}

fn dataset(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/datasets")
        .join(rel)
}

#[test]
fn borrowed_decoding_does_not_allocate_per_statement() {
    let text = std::fs::read_to_string(dataset("iot-assist-weather/iot-assist-weather.nt"))
        .expect("shared/datasets beside the checkout");
    let statements = jelly::nquads::parse_document(&text).unwrap();
    let mut bytes = Vec::new();
    let mut w = JellyWriterBuilder::new(StreamOptions::big())
        .build_vec(&mut bytes)
        .unwrap();
    for s in &statements {
        w.add(s.as_ref()).unwrap();
    }
    w.finish().unwrap();
    let decode = || {
        let mut n = 0u64;
        let mut iri_bytes = 0usize;
        JellyReader::from_slice(&bytes)
            .for_each_statement(|st| {
                n += 1;
                if let TermRef::Iri(s) = st.subject {
                    iri_bytes += s.len();
                }
            })
            .unwrap();
        (n, iri_bytes)
    };
    let ((n, iri_bytes), allocs, _) = measure(decode);
    assert_eq!(n, statements.len() as u64);
    assert!(iri_bytes > 0);
    // The tables' entries and buffers grow while the stream fills them (about one
    // allocation per new name or prefix entry); statements themselves allocate nothing.
    // 100,000 statements here use about 16,000 distinct IRIs.
    assert!(
        allocs < n / 4,
        "{allocs} allocations for {n} statements: the borrowed path allocates per statement"
    );
}

/// IRIs `<P/name-i>` with one long prefix `P` (`prefix_len` bytes) and `names`
/// distinct names, as subjects, in one stream with a name table of `names` entries.
fn long_prefix_stream(prefix_len: usize, names: u32) -> (Vec<u8>, String) {
    let prefix = format!("http://ex.org/{}/", "p".repeat(prefix_len));
    let opts = StreamOptions {
        max_name_table_size: names,
        ..StreamOptions::big()
    };
    let mut bytes = Vec::new();
    let mut w = JellyWriterBuilder::new(opts).build_vec(&mut bytes).unwrap();
    let mut last = String::new();
    for i in 0..names {
        last = format!("{prefix}n{i}");
        w.add(StatementRef::triple(
            TermRef::Iri(&last),
            TermRef::Iri("http://ex.org/p"),
            TermRef::Iri("http://ex.org/o"),
        ))
        .unwrap();
    }
    w.finish().unwrap();
    (bytes, last)
}

#[test]
fn a_long_prefix_is_not_copied_into_every_cached_iri() {
    // 1,024 name ids, each of whose IRIs is the same 256 KiB prefix plus a short
    // name: cached whole per name id, that would be 1,024 × 512 KiB (the buffers
    // round up to a power of two), half a GiB, from a stream of about 300 KiB.
    let (bytes, last) = long_prefix_stream(256 << 10, 1024);
    assert!(bytes.len() < 400 << 10, "{} bytes", bytes.len());
    let decode = || {
        let mut n = 0u32;
        let mut last_subject = String::new();
        let mut total = 0usize;
        JellyReader::from_slice(&bytes)
            .for_each_statement(|st| {
                n += 1;
                if let TermRef::Iri(s) = st.subject {
                    total += s.len();
                    if n == 1024 {
                        last_subject = s.to_owned();
                    }
                }
            })
            .unwrap();
        (n, total, last_subject)
    };
    let ((n, total, last_subject), _, peak) = measure(decode);
    assert_eq!(n, 1024);
    assert_eq!(
        last_subject, last,
        "IRIs past the cache's budget still decode right"
    );
    let prefix_len = last.len() - "n1023".len();
    let want: usize = (0..1024).map(|i| prefix_len + format!("n{i}").len()).sum();
    assert_eq!(total, want, "every subject is whole");
    assert!(
        peak < 64 << 20,
        "decoding held {} MiB at its peak",
        peak >> 20
    );
}

#[test]
fn long_iris_nested_in_quoted_triples_hit_the_frame_limit() {
    // One 256 KiB IRI at every position of a quoted triple nested 20 deep: 60 copies,
    // 15 MiB of text in one statement, from a stream far smaller than the 1 MiB frame
    // limit set here.
    let iri = Term::Iri(format!("http://ex.org/{}/x", "q".repeat(256 << 10)));
    let opts = StreamOptions::big().with_rdf_star(true);
    let mut bytes = Vec::new();
    let mut w = JellyWriterBuilder::new(opts).build_vec(&mut bytes).unwrap();
    let mut subject = iri.clone();
    for _ in 0..20 {
        subject = Term::Triple(Box::new(Triple {
            subject,
            predicate: iri.clone(),
            object: iri.clone(),
        }));
    }
    let st = Statement {
        subject,
        predicate: iri.clone(),
        object: iri.clone(),
        graph: None,
    };
    w.add(st.as_ref()).unwrap();
    w.finish().unwrap();
    assert!(bytes.len() < 300 << 10, "{} bytes", bytes.len());
    let small_frames = DecoderOptions {
        max_frame_bytes: 1 << 20,
        ..DecoderOptions::default()
    };
    let (r, _, peak) = measure(|| {
        JellyReader::from_slice_with_options(&bytes, small_frames, Delimiting::Auto)
            .for_each_statement(|_| {})
    });
    let e = r.unwrap_err();
    assert!(
        matches!(e.kind, DecodeErrorKind::QuotedTooLarge(n) if n == 1 << 20),
        "{e}"
    );
    assert!(e.to_string().contains("1048576 bytes"), "{e}");
    assert!(peak < 8 << 20, "decoding held {} MiB", peak >> 20);
    // With the default frame limit (64 MiB) the same statement decodes.
    let mut n = 0;
    JellyReader::from_slice(&bytes)
        .for_each_statement(|st| {
            assert!(matches!(st.subject, TermRef::Triple(_)));
            n += 1;
        })
        .unwrap();
    assert_eq!(n, 1);
}

/// A stream asking for huge lookup tables (accepted under raised limits) costs memory
/// for the entries it sets, not for the sizes it asks for: 10 million names and a
/// million prefixes and datatypes used to be allocated up front, about 0.5 GB for a
/// stream of a hundred bytes.
#[test]
fn large_declared_tables_cost_only_the_entries_set() {
    use jelly_proto::fields::{entry, frame as ff, iri as iri_f, options as of, row, statement};
    use jelly_proto::wire::{put_bytes_field, put_uint_field, put_varint};
    let field = |f: u32, body: &[u8]| {
        let mut b = Vec::new();
        put_bytes_field(&mut b, f, body);
        b
    };
    let mut opts = Vec::new();
    put_uint_field(&mut opts, of::PHYSICAL_TYPE, 1);
    put_uint_field(&mut opts, of::MAX_NAME_TABLE_SIZE, 10_000_000);
    put_uint_field(&mut opts, of::MAX_PREFIX_TABLE_SIZE, 1_000_000);
    put_uint_field(&mut opts, of::MAX_DATATYPE_TABLE_SIZE, 1_000_000);
    put_uint_field(&mut opts, of::VERSION, 1);
    let mut rows = vec![field(row::OPTIONS, &opts)];
    let mut prefix = Vec::new();
    put_uint_field(&mut prefix, entry::ID, 1);
    put_bytes_field(&mut prefix, entry::VALUE, b"http://ex.org/");
    rows.push(field(row::PREFIX, &prefix));
    for (id, name) in [(1u64, "s"), (2, "p"), (3, "o")] {
        let mut e = Vec::new();
        put_uint_field(&mut e, entry::ID, id);
        put_bytes_field(&mut e, entry::VALUE, name.as_bytes());
        rows.push(field(row::NAME, &e));
    }
    let iri = |p: u64, n: u64| {
        let mut b = Vec::new();
        put_uint_field(&mut b, iri_f::PREFIX_ID, p);
        put_uint_field(&mut b, iri_f::NAME_ID, n);
        b
    };
    let mut t = Vec::new();
    put_bytes_field(&mut t, statement::S_IRI, &iri(1, 1));
    put_bytes_field(&mut t, statement::P_IRI, &iri(1, 2));
    put_bytes_field(&mut t, statement::O_IRI, &iri(1, 3));
    rows.push(field(row::TRIPLE, &t));
    let mut frame = Vec::new();
    for r in &rows {
        put_bytes_field(&mut frame, ff::ROWS, r);
    }
    let mut bytes = Vec::new();
    put_varint(&mut bytes, frame.len() as u64);
    bytes.extend_from_slice(&frame);
    let raised = DecoderOptions {
        max_name_table_size: 10_000_000,
        max_prefix_table_size: 1_000_000,
        max_datatype_table_size: 1_000_000,
        ..DecoderOptions::default()
    };
    let (r, _, peak) = measure(|| {
        let mut got = Vec::new();
        JellyReader::from_slice_with_options(&bytes, raised, Delimiting::Auto)
            .for_each_statement(|st| got.push(st.to_owned()))
            .map(|()| got)
    });
    let got = r.unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].subject, Term::Iri("http://ex.org/s".into()));
    assert_eq!(got[0].object, Term::Iri("http://ex.org/o".into()));
    assert!(peak < 1 << 20, "decoding held {} KiB", peak >> 10);
}

/// Nor for the highest id it uses: one name of id 10 million, one prefix and one
/// datatype of id a million, in tables of those sizes, decode in well under a
/// megabyte (the tables' slots used to reach the highest id: about 0.5 GB).
#[test]
fn entries_of_high_id_cost_only_themselves() {
    use jelly_proto::fields::{
        entry, frame as ff, iri as iri_f, literal, options as of, row, statement,
    };
    use jelly_proto::wire::{put_bytes_field, put_uint_field, put_varint};
    let field = |f: u32, body: &[u8]| {
        let mut b = Vec::new();
        put_bytes_field(&mut b, f, body);
        b
    };
    let entry_row = |r: u32, id: u64, value: &str| {
        let mut e = Vec::new();
        put_uint_field(&mut e, entry::ID, id);
        put_bytes_field(&mut e, entry::VALUE, value.as_bytes());
        field(r, &e)
    };
    let mut opts = Vec::new();
    put_uint_field(&mut opts, of::PHYSICAL_TYPE, 1);
    put_uint_field(&mut opts, of::MAX_NAME_TABLE_SIZE, 10_000_000);
    put_uint_field(&mut opts, of::MAX_PREFIX_TABLE_SIZE, 1_000_000);
    put_uint_field(&mut opts, of::MAX_DATATYPE_TABLE_SIZE, 1_000_000);
    put_uint_field(&mut opts, of::VERSION, 1);
    let rows = [
        field(row::OPTIONS, &opts),
        entry_row(row::PREFIX, 1_000_000, "http://ex.org/"),
        entry_row(row::NAME, 10_000_000, "s"),
        entry_row(row::DATATYPE, 1_000_000, "http://ex.org/int"),
        {
            let mut iri = Vec::new();
            put_uint_field(&mut iri, iri_f::PREFIX_ID, 1_000_000);
            put_uint_field(&mut iri, iri_f::NAME_ID, 10_000_000);
            let mut lit = Vec::new();
            put_bytes_field(&mut lit, literal::LEX, b"5");
            put_uint_field(&mut lit, literal::DATATYPE, 1_000_000);
            let mut t = Vec::new();
            put_bytes_field(&mut t, statement::S_IRI, &iri);
            put_bytes_field(&mut t, statement::P_IRI, &iri);
            put_bytes_field(&mut t, statement::O_LITERAL, &lit);
            field(row::TRIPLE, &t)
        },
    ];
    let mut frame = Vec::new();
    for r in &rows {
        put_bytes_field(&mut frame, ff::ROWS, r);
    }
    let mut bytes = Vec::new();
    put_varint(&mut bytes, frame.len() as u64);
    bytes.extend_from_slice(&frame);
    let raised = DecoderOptions {
        max_name_table_size: 10_000_000,
        max_prefix_table_size: 1_000_000,
        max_datatype_table_size: 1_000_000,
        ..DecoderOptions::default()
    };
    let (r, _, peak) = measure(|| {
        let mut got = Vec::new();
        JellyReader::from_slice_with_options(&bytes, raised, Delimiting::Auto)
            .for_each_statement(|st| got.push(st.to_owned()))
            .map(|()| got)
    });
    let got = r.unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].subject, Term::Iri("http://ex.org/s".into()));
    assert_eq!(got[0].predicate, Term::Iri("http://ex.org/s".into()));
    assert_eq!(
        got[0].object,
        Term::Literal(jelly::Literal {
            lex: "5".into(),
            kind: jelly::OwnedLiteralKind::Typed("http://ex.org/int".into()),
        })
    );
    assert!(peak < 1 << 20, "decoding held {} KiB", peak >> 10);
}

/// A length-delimited field `number` around `payload`.
fn len_field(number: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    jelly_proto::wire::put_bytes_field(&mut out, number, payload);
    out
}

/// jelly-text printing holds the text of one row at a time, not of the frame.
#[test]
fn jelly_text_printing_holds_one_row_at_a_time() {
    // 100,000 rows `graph_end {}`: 400 KB of frame, 2.6 MB of text.
    let row = len_field(1, &len_field(5, &[]));
    let frame: Vec<u8> = row
        .iter()
        .copied()
        .cycle()
        .take(row.len() * 100_000)
        .collect();
    let (r, _, peak) =
        measure(|| jelly::text_format::print_frame(0, &frame, 0, &mut std::io::sink()));
    r.unwrap();
    assert!(peak < 64 << 10, "peak {peak} bytes for a 400 KB frame");
}

/// A row of quoted triples nested 250 deep is printed into one buffer: no buffer per
/// level, whose text would then be copied into the level above (copies that grow with
/// the square of the depth).
#[test]
fn jelly_text_printing_of_deep_nesting_copies_nothing_per_level() {
    let mut triple = Vec::new();
    for _ in 0..250 {
        triple = len_field(4, &triple); // s_triple_term { … }
    }
    let frame = len_field(1, &len_field(2, &triple));
    let mut text = Vec::with_capacity(1 << 20);
    let (r, allocs, _) = measure(|| jelly::text_format::print_frame(0, &frame, 0, &mut text));
    r.unwrap();
    assert!(text.len() > 100_000, "{} bytes of text", text.len());
    // The row's buffer, grown by doubling: a few dozen allocations, not 250.
    assert!(allocs < 60, "{allocs} allocations for 250 levels");
}
