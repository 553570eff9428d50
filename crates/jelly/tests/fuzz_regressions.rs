//! Inputs found by the cargo-fuzz targets in `fuzz/`, kept as regression tests.

use jelly::{
    DecodeErrorKind, FramePolicy, JellyReader, JellyWriterBuilder, PhysicalType, Statement,
    StreamOptions, Table, Term,
};

/// `roundtrip` crash-0724db616e1bf8113946cdfcf87fcc49b51b552c (input `9P8B9gAKAAr/9A==`),
/// found against a work-in-progress encoder IRI cache (never committed): QUADS, name
/// table 30, prefix table 0, datatype table 4, rdf_star + generalized, non-delimited,
/// one statement with the same IRI as subject, predicate and object. The cache answered
/// the predicate with name id 0 (= previous + 1 = 2) instead of the explicit id 1.
#[test]
fn roundtrip_same_iri_in_all_positions_quads_non_delimited() {
    let opts = StreamOptions::with_tables(30, 0, 4)
        .with_physical_type(PhysicalType::Quads)
        .with_rdf_star(true)
        .with_generalized_statements(true);
    let mut out = Vec::new();
    let mut w = JellyWriterBuilder::new(opts)
        .frame_policy(FramePolicy::Manual)
        .delimited(false)
        .build(&mut out)
        .unwrap();
    let t = Term::Iri("http://example.org/n0".into());
    let s = Statement {
        subject: t.clone(),
        predicate: t.clone(),
        object: t.clone(),
        graph: None,
    };
    w.add(s.as_ref()).unwrap();
    w.finish().unwrap();
    let frames = JellyReader::new(&out[..]).read_all_frames().unwrap();
    let expected = Statement {
        graph: Some(Term::DefaultGraph),
        ..s
    };
    assert_eq!(frames, vec![vec![expected]]);
}

/// The bytes that faulty encoder wrote for the case above. The quad row
/// `0a 0a 1a 08 0a 00 2a 00 4a 00 7a 00` has three empty IRIs: name ids 1, 2, 3 by the
/// zero rule, and only name 1 is defined, so the decoder must report the undefined
/// entry 2 (frame 0, row 2), not decode anything.
#[test]
fn decoder_rejects_faulty_encoder_output() {
    let bytes: [u8; 55] = [
        0x0a, 0x0e, 0x0a, 0x0c, 0x10, 0x02, 0x18, 0x01, 0x20, 0x01, 0x48, 0x1e, 0x58, 0x04, 0x78,
        0x01, 0x0a, 0x19, 0x4a, 0x17, 0x12, 0x15, 0x68, 0x74, 0x74, 0x70, 0x3a, 0x2f, 0x2f, 0x65,
        0x78, 0x61, 0x6d, 0x70, 0x6c, 0x65, 0x2e, 0x6f, 0x72, 0x67, 0x2f, 0x6e, 0x30, 0x0a, 0x0a,
        0x1a, 0x08, 0x0a, 0x00, 0x2a, 0x00, 0x4a, 0x00, 0x7a, 0x00,
    ];
    let e = JellyReader::new(&bytes[..]).read_all_frames().unwrap_err();
    assert!(
        matches!(
            e.kind,
            DecodeErrorKind::UndefinedEntry {
                table: Table::Name,
                id: 2
            }
        ),
        "{e}"
    );
    assert_eq!((e.frame, e.row), (0, Some(2)));
}

/// `decode` crash-74c713e2788c3f827f936cf634847ead3cee9dea
/// (`ChQa////////////Ae316goOAQAAAAAAAnh6/ocB`): a non-delimited frame whose row starts
/// with a quad field (`1a`) declaring a length of 2^64 - 1. The statement-row fast path
/// computed `offset + length` and overflowed (a panic in debug builds, a wrapped
/// comparison in release). It must be an ordinary decoding error.
#[test]
fn decode_quad_row_with_huge_declared_length() {
    let bytes: [u8; 30] = [
        0x0a, 0x14, 0x1a, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0xed, 0xf5,
        0xea, 0x0a, 0x0e, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x78, 0x7a, 0xfe, 0x87, 0x01,
    ];
    let e = JellyReader::new(&bytes[..]).read_all_frames().unwrap_err();
    assert_eq!((e.frame, e.row), (0, Some(0)), "{e}");
    // The same row with every length that could wrap `offset + length`.
    for len in [u64::MAX, u64::MAX - 1, u64::MAX - 10, 1 << 63] {
        let mut row = vec![0x1a];
        let mut v = Vec::new();
        jelly_proto::wire::put_varint(&mut v, len);
        row.extend_from_slice(&v);
        row.extend_from_slice(&[0x0a, 0x00]);
        let mut frame = vec![0x0a];
        jelly_proto::wire::put_varint(&mut frame, row.len() as u64);
        frame.extend_from_slice(&row);
        let mut dec = jelly::Decoder::default();
        let mut f = dec.frame(&frame);
        assert!(f.next_event().is_err(), "length {len}");
    }
}
