//! `jelly-text`: binary → text → binary over the conformance suite, hand-written text
//! in each syntax variant, and errors that name line and column.

use std::path::{Path, PathBuf};

use jelly::text_format::{TextFormatError, TextFrameReader, parse_frame, print_frame};
use jelly::{Delimiting, FrameReader};

const LIMIT: u64 = 64 << 20;

fn suite() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/jelly-conformance/rdf")
}

fn jelly_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            jelly_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "jelly") {
            out.push(p);
        }
    }
}

/// The frames of a binary stream (autodetected framing) and the framing found.
fn frames_of(bytes: &[u8]) -> (Vec<Vec<u8>>, Delimiting) {
    let mut r = FrameReader::new(bytes, Delimiting::Auto, LIMIT);
    let mut frames = Vec::new();
    while let Some(f) = r.next_frame().expect("stream framing") {
        frames.push(f.bytes.to_vec());
    }
    (frames, r.delimiting())
}

fn to_text(frames: &[Vec<u8>]) -> String {
    let mut text = Vec::new();
    for (i, f) in frames.iter().enumerate() {
        print_frame(i as u64, f, 0, &mut text).expect("printable frame");
    }
    String::from_utf8(text).expect("text is UTF-8")
}

fn printed(index: u64, frame: &[u8]) -> String {
    let mut out = Vec::new();
    print_frame(index, frame, 0, &mut out).expect("printable frame");
    String::from_utf8(out).expect("text is UTF-8")
}

fn from_text(text: &str) -> Result<Vec<Vec<u8>>, TextFormatError> {
    let mut r = TextFrameReader::new(text.as_bytes(), LIMIT);
    let mut frames = Vec::new();
    while let Some(f) = r.next_frame()? {
        frames.push(f);
    }
    Ok(frames)
}

#[test]
fn every_conformance_stream_round_trips_byte_for_byte() {
    let mut files = Vec::new();
    jelly_files(&suite(), &mut files);
    assert!(
        files.len() > 200,
        "conformance suite not found at {}",
        suite().display()
    );
    let mut negatives = 0;
    for path in &files {
        let bytes = std::fs::read(path).unwrap();
        let (frames, delimiting) = frames_of(&bytes);
        let text = to_text(&frames);
        let back = from_text(&text).unwrap_or_else(|e| panic!("{}: {e}\n{text}", path.display()));
        assert_eq!(back, frames, "{}:\n{text}", path.display());
        // And the stream as a whole, in its framing.
        let mut stream = Vec::new();
        for f in &back {
            if delimiting == Delimiting::Delimited {
                jelly_proto::wire::put_varint(&mut stream, f.len() as u64);
            }
            stream.extend_from_slice(f);
        }
        assert_eq!(stream, bytes, "{}", path.display());
        if path.to_string_lossy().contains("neg_") {
            negatives += 1;
        }
    }
    assert!(negatives > 20, "negative cases included: {negatives}");
}

#[test]
fn printed_like_protobuf_java() {
    // options, a name entry with UTF-8 and quotes, a triple with a literal.
    let text = "rows {\n  options {\n    stream_name: \"s\"\n    physical_type: PHYSICAL_STREAM_TYPE_TRIPLES\n    rdf_star: true\n    max_name_table_size: 4000\n    logical_type: LOGICAL_STREAM_TYPE_FLAT_TRIPLES\n    version: 1\n  }\n}\nrows {\n  name {\n    value: \"\\303\\251\\\"\\'\\n\"\n  }\n}\nrows {\n  triple {\n    s_bnode: \"b\"\n    p_iri {\n      name_id: 1\n    }\n    o_literal {\n      lex: \"x\"\n      datatype: 2\n    }\n  }\n}\nmetadata {\n  key: \"k\"\n  value: \"\\000\\377\"\n}\n";
    let bytes = parse_frame(text, LIMIT).unwrap();
    assert_eq!(printed(7, &bytes), format!("# Frame 7\n{text}"));
}

#[test]
fn every_syntax_variant_gives_the_same_bytes() {
    let canonical = parse_frame(
        "rows { triple { s_iri { prefix_id: 1 name_id: 2 } p_bnode: \"ab\" o_literal { lex: \"é\\n\" langtag: \"en\" } } }\n\
         rows { options { physical_type: PHYSICAL_STREAM_TYPE_QUADS rdf_star: true } }",
        LIMIT,
    )
    .unwrap();
    let variants = [
        // `< >`, `:` before a message, `;` and `,` separators, comments.
        "# a comment\nrows: < triple: { s_iri < prefix_id: 1; name_id: 2, > ; p_bnode: 'ab' # why\n o_literal { lex: \"\\303\\251\\n\" langtag: \"en\" } } >\n\
         rows { options { physical_type: 2, rdf_star: 1 } }",
        // A list of rows; string concatenation; hex, \u and \x escapes; hex and octal numbers.
        "rows: [ { triple { s_iri { prefix_id: 0x1 name_id: 02 } p_bnode: \"a\" 'b' o_literal { lex: \"\\u00e9\\x0a\" langtag: \"e\" \"n\" } } },\n\
         { options { physical_type: PHYSICAL_STREAM_TYPE_QUADS rdf_star: True } } ]",
        // Fields by number (as unknown fields are printed), and \U.
        "1 { 2 { 1 { 1: 1 2: 2 } 6: \"ab\" 11 { 1: \"\\U000000e9\\n\" 2: \"en\" } } }\n\
         1 { 1 { 2: 2 4: 1 } }",
    ];
    for v in variants {
        assert_eq!(parse_frame(v, LIMIT).unwrap(), canonical, "{v}");
    }
}

#[test]
fn invalid_streams_can_be_written() {
    // Two subjects in one triple, a default value written out, an unknown field, a
    // fixed32 and a fixed64 field, a varint beyond uint32 in a uint32 field.
    let text = "rows {\n  triple {\n    s_bnode: \"a\"\n    s_bnode: \"b\"\n    99: 5\n  }\n}\nrows {\n  name {\n    id: 0\n    1: 5000000000\n  }\n}\n7: 0x0000002a\n8: 0x000000000000002a\n";
    let bytes = parse_frame(text, LIMIT).unwrap();
    assert_eq!(printed(0, &bytes), format!("# Frame 0\n{text}"));
    assert_eq!(&bytes[bytes.len() - 9..], &[0x41, 42, 0, 0, 0, 0, 0, 0, 0]);
}

#[test]
fn malformed_nested_bytes_are_printed_as_bytes() {
    // rows { triple { <a truncated field> } }: the triple's bytes are no message.
    let frame = [0x0a, 0x04, 0x12, 0x02, 0x0a, 0x05];
    let text = printed(0, &frame);
    assert_eq!(text, "# Frame 0\nrows {\n  2: \"\\n\\005\"\n}\n");
    assert_eq!(parse_frame(&text, LIMIT).unwrap(), frame);
}

#[test]
fn a_frame_that_is_no_message_is_an_error_naming_frame_and_byte() {
    let mut out = Vec::new();
    let e = print_frame(3, &[0x0a, 0x09, 0x00], 100, &mut out).unwrap_err();
    assert_eq!(e.to_string(), "frame 3: truncated message at byte 103");
    assert!(out.is_empty());
}

#[test]
fn frames_are_split_at_frame_comments() {
    let text = "# written by hand\n\n# Frame 0\nrows { graph_end {} }\n# Frame 1\n# Frame 2\nrows { graph_end {} }\n";
    let frames = from_text(text).unwrap();
    assert_eq!(
        frames,
        vec![vec![0x0a, 2, 0x2a, 0], vec![], vec![0x0a, 2, 0x2a, 0]]
    );
    // No marker: one frame; only comments: none.
    assert_eq!(
        from_text("rows { graph_end {} }\nrows { graph_end {} }")
            .unwrap()
            .len(),
        1
    );
    assert!(from_text("# nothing\n\n").unwrap().is_empty());
    assert!(from_text("").unwrap().is_empty());
}

fn syntax_error(text: &str) -> (u64, u64, String) {
    match from_text(text).unwrap_err() {
        TextFormatError::Syntax {
            line,
            column,
            message,
        } => (line, column, message),
        other => panic!("{other:?}"),
    }
}

#[test]
fn errors_name_line_column_and_what_was_expected() {
    let cases: &[(&str, u64, u64, &str)] = &[
        (
            "# Frame 0\nrows { triple { s_iri { prefix_id: x } } }",
            2,
            36,
            "expected a number",
        ),
        (
            "# Frame 0\nrows {}\n# Frame 1\nrows { tripel {} }",
            4,
            8,
            "unknown field `tripel` in RdfStreamRow",
        ),
        (
            "rows { options { physical_type: QUADS } }",
            1,
            33,
            "expected a PhysicalStreamType value",
        ),
        (
            "rows { name { id: 4294967296 } }",
            1,
            19,
            "out of range for uint32",
        ),
        ("rows { name { value: \"abc } }", 1, 22, "string not closed"),
        (
            "rows { name { value: \"\\q\" } }",
            1,
            23,
            "unknown escape `\\q`",
        ),
        ("rows { name { value: \"\\400\" } }", 1, 23, "is over 255"),
        (
            "rows { name { value: \"\\ud800\" } }",
            1,
            23,
            "no Unicode scalar value",
        ),
        ("rows { name { id 3 } }", 1, 18, "expected `:`"),
        (
            "rows { triple { s_iri: 3 } }",
            1,
            24,
            "expected `{` to open RdfIri",
        ),
        (
            "rows { triple {",
            1,
            16,
            "expected a field or `}`, found the end of the frame",
        ),
        (
            "rows { options { rdf_star: maybe } }",
            1,
            28,
            "expected a bool",
        ),
        ("rows { [ext.field] {} }", 1, 8, "extension"),
        ("0: 1", 1, 1, "no field number"),
        (
            "rows { 5 { name: \"x\" } }",
            1,
            12,
            "fields are given by number too",
        ),
        (
            "rows: [ { graph_end {} } { graph_end {} } ]",
            1,
            26,
            "expected `,` or `]`",
        ),
    ];
    for (text, line, column, what) in cases {
        let (l, c, m) = syntax_error(text);
        assert!(
            (l, c) == (*line, *column) && m.contains(what),
            "{text:?}: got {l}:{c} {m:?}, wanted {line}:{column} {what:?}"
        );
    }
}

#[test]
fn nesting_and_size_are_bounded() {
    let depth = jelly::text_format::MAX_TEXT_DEPTH;
    let deep = format!("{}{}", "1 { ".repeat(depth), "}".repeat(depth));
    let (_, _, m) = syntax_error(&deep);
    assert!(m.contains("nested deeper than"), "{m}");
    // A frame over the limit is refused, whatever the text's size.
    let big = format!("rows {{ name {{ value: \"{}\" }} }}", "x".repeat(2000));
    let e = TextFrameReader::new(big.as_bytes(), 1000)
        .next_frame()
        .unwrap_err();
    assert!(e.to_string().contains("over 1000 bytes"), "{e}");
    // Text of one frame far over the limit (comments) is refused before it is parsed.
    let chatty = format!("{}rows {{}}\n", "# blah blah blah blah\n".repeat(100_000));
    let e = TextFrameReader::new(chatty.as_bytes(), 100)
        .next_frame()
        .unwrap_err();
    assert!(
        e.to_string().contains("the text of this frame is over"),
        "{e}"
    );
}

mod properties {
    use super::*;
    use jelly_proto::wire::{WireType, put_bytes_field, put_tag, put_varint};
    use proptest::prelude::*;

    /// One protobuf field: varints (small ones hit bools and enums; some overlong),
    /// strings, fixed32/64, and messages of such fields, under numbers the schema has and has not.
    fn field() -> impl Strategy<Value = Vec<u8>> {
        let leaf = prop_oneof![
            (1u32..20, prop_oneof![0u64..4, any::<u64>()]).prop_map(|(n, v)| {
                let mut out = Vec::new();
                put_tag(&mut out, n, WireType::Varint);
                put_varint(&mut out, v);
                out
            }),
            (1u32..20, prop::collection::vec(any::<u8>(), 0..6)).prop_map(|(n, b)| {
                let mut out = Vec::new();
                put_bytes_field(&mut out, n, &b);
                out
            }),
            (1u32..20, any::<u32>()).prop_map(|(n, v)| {
                let mut out = Vec::new();
                put_tag(&mut out, n, WireType::Fixed32);
                out.extend_from_slice(&v.to_le_bytes());
                out
            }),
            // A varint one byte longer than it needs (a padding 0x80 … 0x00).
            (1u32..20, 0u64..1 << 50).prop_map(|(n, v)| {
                let mut out = Vec::new();
                put_tag(&mut out, n, WireType::Varint);
                put_varint(&mut out, v);
                if let Some(last) = out.last_mut() {
                    *last |= 0x80;
                }
                out.push(0);
                out
            }),
            (1u32..20, any::<u64>()).prop_map(|(n, v)| {
                let mut out = Vec::new();
                put_tag(&mut out, n, WireType::Fixed64);
                out.extend_from_slice(&v.to_le_bytes());
                out
            }),
        ];
        leaf.prop_recursive(6, 64, 4, |inner| {
            (1u32..20, prop::collection::vec(inner, 0..4)).prop_map(|(n, parts)| {
                let mut out = Vec::new();
                put_bytes_field(&mut out, n, &parts.concat());
                out
            })
        })
    }

    /// A frame of such fields, sometimes with one byte changed (malformed nesting,
    /// overlong varints, groups).
    fn frame() -> impl Strategy<Value = Vec<u8>> {
        (
            prop::collection::vec(field(), 0..6),
            any::<prop::sample::Index>(),
            prop::option::of(any::<u8>()),
        )
            .prop_map(|(fields, at, byte)| {
                let mut f = fields.concat();
                if let (Some(b), false) = (byte, f.is_empty()) {
                    let i = at.index(f.len());
                    f[i] = b;
                }
                f
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

        /// Whatever a frame holds, if it prints, its text parses back to its bytes.
        #[test]
        fn printed_frames_parse_back_to_their_bytes(f in frame()) {
            let mut text = Vec::new();
            if print_frame(0, &f, 0, &mut text).is_ok() {
                let text = String::from_utf8(text).expect("text is UTF-8");
                let back = from_text(&text).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
                prop_assert_eq!(back, vec![f], "{}", text);
            }
        }

        /// Any text parses or is refused with an error; nothing panics.
        #[test]
        fn any_text_parses_or_is_refused(text in "[ -~\n\"'\\\\{}<>:;,#0-9a-z_\\[\\]é]{0,120}") {
            let _ = from_text(&text);
        }
    }

    #[test]
    fn an_overlong_varint_at_the_top_level_is_refused_and_nested_kept_as_bytes() {
        // rows { name_id … } with the row's length written in two bytes.
        let mut out = Vec::new();
        let e = print_frame(2, &[0x0a, 0x82, 0x00, 0x2a, 0x00], 10, &mut out).unwrap_err();
        assert!(
            matches!(
                e,
                TextFormatError::Overlong {
                    frame: 2,
                    offset: 11
                }
            ),
            "{e}"
        );
        assert!(out.is_empty());
        // rows { graph_end { } } where graph_end's length takes two bytes: the row is
        // printed as its bytes.
        let frame = [0x0a, 0x03, 0x2a, 0x80, 0x00];
        let text = printed(0, &frame);
        assert_eq!(text, "# Frame 0\n1: \"*\\200\\000\"\n");
        assert_eq!(from_text(&text).unwrap(), vec![frame.to_vec()]);
    }
}
