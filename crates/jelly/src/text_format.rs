//! Jelly-RDF frames in the protobuf text format (`jelly-text`, `.jelly.txt`), the
//! human-readable form the JVM `jelly-cli` prints and reads, for looking into streams
//! and crafting them by hand.
//!
//! Both directions work on the frames' bytes, driven by a [schema table](SCHEMA) of
//! the messages of `rdf.proto`, not on decoded statements: the printer writes the
//! fields as they come on the wire (fields the schema does not know, or of another wire
//! type than it says, by number, as `protoc` does), and the parser writes each field as
//! it is written. So a frame printed and parsed back gives the same bytes, and streams
//! the decoder would refuse (a row with two subjects, a term of a wrong kind, a missing
//! options row) can be written down.
//!
//! Bytes that are no message where the schema expects one are printed as a string by
//! field number, and so is a message holding a varint written in more bytes than its
//! value needs (text keeps values, not their encoding); such a varint in a frame's own
//! fields cannot be kept at all, and the frame is refused.
//!
//! Layout of a stream (as the JVM CLI writes it): each frame starts with a comment line
//! `# Frame N`, followed by the frame's fields (`rows { … }`, `metadata { … }`). When
//! parsing, every line starting with `# Frame` (after spaces) begins a new frame; text
//! before the first such line is a frame of its own only if it has a field, and a text
//! with no such line is one frame.
//!
//! What the parser takes is the protobuf text format: `#` comments, `field: value`,
//! `field { … }` or `field < … >` (the `:` before a message is optional), `;` or `,`
//! after a field, lists `field: [v, v]`, adjacent string literals (concatenated),
//! `"…"` or `'…'` strings with the C escapes, octal `\NNN`, hex `\xNN`, `\uXXXX` and
//! `\UXXXXXXXX`, enum values by name or number, integers in decimal, hex `0x…` or octal
//! `0…`. Unlike `protoc` it also takes a field given twice, or two fields of a oneof
//! (both are written), string fields that are not UTF-8, and fields named by number:
//! `N: 123` (varint), `N: 0x0000002a` (eight hex digits: fixed32), `N:
//! 0x000000000000002a` (sixteen: fixed64), `N: "…"` and `N { … }` (length-delimited),
//! for any `N` a key on the wire can hold (1 to 2^32 - 1).
//!
//! Bounds: a parsed frame larger than the reader's frame limit is refused, and so is
//! the text of one frame over 16 times that limit (or 1 MiB, if larger); messages nest
//! at most [`MAX_TEXT_DEPTH`] levels. Errors name the line and column and what was
//! expected. The printer holds the text of one row at a time.

use std::io::BufRead;

use jelly_proto::fields;
use jelly_proto::wire::{self, Reader, WireType};
use thiserror::Error;

use crate::text_position::position_in;

/// Deepest nesting of messages in a text frame (the frame is level 1; a quoted triple
/// takes one level for each step down), and in the printer the deepest it walks
/// before printing a message as its bytes.
pub const MAX_TEXT_DEPTH: usize = crate::MAX_NESTING_CAP + 8;

/// The type of a field, as in `rdf.proto`.
#[derive(Debug, Clone, Copy)]
pub enum FieldKind {
    /// `uint32` (varint).
    Uint32,
    /// `bool` (varint 0 or 1).
    Bool,
    /// `string` (length-delimited, UTF-8).
    String,
    /// `bytes` (length-delimited).
    Bytes,
    /// An enum (varint, an `int32` on the wire).
    Enum(&'static EnumDef),
    /// A message (length-delimited).
    Message(&'static MessageDef),
}

/// One field of a message.
#[derive(Debug)]
pub struct FieldDef {
    /// The field's name in `rdf.proto`, as text format writes it.
    pub name: &'static str,
    /// The field number (from [`jelly_proto::fields`]).
    pub number: u32,
    /// Its type.
    pub kind: FieldKind,
    /// The oneof the field belongs to, if any.
    pub oneof: Option<&'static str>,
    /// `repeated` (or a map, which is a repeated entry message).
    pub repeated: bool,
}

/// A message of `rdf.proto`.
#[derive(Debug)]
pub struct MessageDef {
    /// Its name.
    pub name: &'static str,
    /// Its fields, in field-number order.
    pub fields: &'static [FieldDef],
}

/// An enum of `rdf.proto`.
#[derive(Debug)]
pub struct EnumDef {
    /// Its name.
    pub name: &'static str,
    /// Its values: (name, number).
    pub values: &'static [(&'static str, i32)],
}

impl MessageDef {
    fn by_number(&self, number: u32) -> Option<&'static FieldDef> {
        // The tables are `'static`; this just finds the entry.
        let fields: &'static [FieldDef] = self.fields;
        fields.iter().find(|f| f.number == number)
    }

    fn by_name(&self, name: &str) -> Option<&'static FieldDef> {
        let fields: &'static [FieldDef] = self.fields;
        fields.iter().find(|f| f.name == name)
    }
}

const fn field(
    name: &'static str,
    number: u32,
    kind: FieldKind,
    oneof: Option<&'static str>,
) -> FieldDef {
    FieldDef {
        name,
        number,
        kind,
        oneof,
        repeated: false,
    }
}

use FieldKind::{Bool, Bytes, Enum, Message, String as Str, Uint32};
use fields::statement as st;

static RDF_IRI: MessageDef = MessageDef {
    name: "RdfIri",
    fields: &[
        field("prefix_id", fields::iri::PREFIX_ID, Uint32, None),
        field("name_id", fields::iri::NAME_ID, Uint32, None),
    ],
};

static RDF_LITERAL: MessageDef = MessageDef {
    name: "RdfLiteral",
    fields: &[
        field("lex", fields::literal::LEX, Str, None),
        field(
            "langtag",
            fields::literal::LANGTAG,
            Str,
            Some("literalKind"),
        ),
        field(
            "datatype",
            fields::literal::DATATYPE,
            Uint32,
            Some("literalKind"),
        ),
    ],
};

static RDF_DEFAULT_GRAPH: MessageDef = MessageDef {
    name: "RdfDefaultGraph",
    fields: &[],
};

/// The subject, predicate and object fields that `RdfTriple` and `RdfQuad` share (field
/// numbers 1–12 in both), followed by `$extra` fields.
macro_rules! statement_fields {
    ($($extra:expr),* $(,)?) => {
        &[
            field("s_iri", st::S_IRI, Message(&RDF_IRI), Some("subject")),
            field("s_bnode", st::S_BNODE, Str, Some("subject")),
            field(
                "s_literal",
                st::S_LITERAL,
                Message(&RDF_LITERAL),
                Some("subject"),
            ),
            field(
                "s_triple_term",
                st::S_TRIPLE,
                Message(&RDF_TRIPLE),
                Some("subject"),
            ),
            field("p_iri", st::P_IRI, Message(&RDF_IRI), Some("predicate")),
            field("p_bnode", st::P_BNODE, Str, Some("predicate")),
            field(
                "p_literal",
                st::P_LITERAL,
                Message(&RDF_LITERAL),
                Some("predicate"),
            ),
            field(
                "p_triple_term",
                st::P_TRIPLE,
                Message(&RDF_TRIPLE),
                Some("predicate"),
            ),
            field("o_iri", st::O_IRI, Message(&RDF_IRI), Some("object")),
            field("o_bnode", st::O_BNODE, Str, Some("object")),
            field(
                "o_literal",
                st::O_LITERAL,
                Message(&RDF_LITERAL),
                Some("object"),
            ),
            field(
                "o_triple_term",
                st::O_TRIPLE,
                Message(&RDF_TRIPLE),
                Some("object"),
            ),
            $($extra),*
        ]
    };
}

static RDF_TRIPLE: MessageDef = MessageDef {
    name: "RdfTriple",
    fields: statement_fields!(),
};

static RDF_QUAD: MessageDef = MessageDef {
    name: "RdfQuad",
    fields: statement_fields!(
        field("g_iri", st::G_IRI, Message(&RDF_IRI), Some("graph")),
        field("g_bnode", st::G_BNODE, Str, Some("graph")),
        field(
            "g_default_graph",
            st::G_DEFAULT,
            Message(&RDF_DEFAULT_GRAPH),
            Some("graph"),
        ),
        field(
            "g_literal",
            st::G_LITERAL,
            Message(&RDF_LITERAL),
            Some("graph"),
        ),
    ),
};

static RDF_GRAPH_START: MessageDef = MessageDef {
    name: "RdfGraphStart",
    fields: &[
        field(
            "g_iri",
            fields::graph_start::G_IRI,
            Message(&RDF_IRI),
            Some("graph"),
        ),
        field("g_bnode", fields::graph_start::G_BNODE, Str, Some("graph")),
        field(
            "g_default_graph",
            fields::graph_start::G_DEFAULT,
            Message(&RDF_DEFAULT_GRAPH),
            Some("graph"),
        ),
        field(
            "g_literal",
            fields::graph_start::G_LITERAL,
            Message(&RDF_LITERAL),
            Some("graph"),
        ),
    ],
};

static RDF_GRAPH_END: MessageDef = MessageDef {
    name: "RdfGraphEnd",
    fields: &[],
};

static RDF_NAMESPACE_DECLARATION: MessageDef = MessageDef {
    name: "RdfNamespaceDeclaration",
    fields: &[
        field("name", fields::namespace::NAME, Str, None),
        field("value", fields::namespace::VALUE, Message(&RDF_IRI), None),
    ],
};

static RDF_NAME_ENTRY: MessageDef = MessageDef {
    name: "RdfNameEntry",
    fields: &[
        field("id", fields::entry::ID, Uint32, None),
        field("value", fields::entry::VALUE, Str, None),
    ],
};

static RDF_PREFIX_ENTRY: MessageDef = MessageDef {
    name: "RdfPrefixEntry",
    fields: &[
        field("id", fields::entry::ID, Uint32, None),
        field("value", fields::entry::VALUE, Str, None),
    ],
};

static RDF_DATATYPE_ENTRY: MessageDef = MessageDef {
    name: "RdfDatatypeEntry",
    fields: &[
        field("id", fields::entry::ID, Uint32, None),
        field("value", fields::entry::VALUE, Str, None),
    ],
};

static PHYSICAL_STREAM_TYPE: EnumDef = EnumDef {
    name: "PhysicalStreamType",
    values: &[
        ("PHYSICAL_STREAM_TYPE_UNSPECIFIED", 0),
        ("PHYSICAL_STREAM_TYPE_TRIPLES", 1),
        ("PHYSICAL_STREAM_TYPE_QUADS", 2),
        ("PHYSICAL_STREAM_TYPE_GRAPHS", 3),
    ],
};

static LOGICAL_STREAM_TYPE: EnumDef = EnumDef {
    name: "LogicalStreamType",
    values: &[
        ("LOGICAL_STREAM_TYPE_UNSPECIFIED", 0),
        ("LOGICAL_STREAM_TYPE_FLAT_TRIPLES", 1),
        ("LOGICAL_STREAM_TYPE_FLAT_QUADS", 2),
        ("LOGICAL_STREAM_TYPE_GRAPHS", 3),
        ("LOGICAL_STREAM_TYPE_DATASETS", 4),
        ("LOGICAL_STREAM_TYPE_SUBJECT_GRAPHS", 13),
        ("LOGICAL_STREAM_TYPE_NAMED_GRAPHS", 14),
        ("LOGICAL_STREAM_TYPE_TIMESTAMPED_NAMED_GRAPHS", 114),
    ],
};

static RDF_STREAM_OPTIONS: MessageDef = MessageDef {
    name: "RdfStreamOptions",
    fields: &[
        field("stream_name", fields::options::STREAM_NAME, Str, None),
        field(
            "physical_type",
            fields::options::PHYSICAL_TYPE,
            Enum(&PHYSICAL_STREAM_TYPE),
            None,
        ),
        field(
            "generalized_statements",
            fields::options::GENERALIZED_STATEMENTS,
            Bool,
            None,
        ),
        field("rdf_star", fields::options::RDF_STAR, Bool, None),
        field(
            "max_name_table_size",
            fields::options::MAX_NAME_TABLE_SIZE,
            Uint32,
            None,
        ),
        field(
            "max_prefix_table_size",
            fields::options::MAX_PREFIX_TABLE_SIZE,
            Uint32,
            None,
        ),
        field(
            "max_datatype_table_size",
            fields::options::MAX_DATATYPE_TABLE_SIZE,
            Uint32,
            None,
        ),
        field(
            "logical_type",
            fields::options::LOGICAL_TYPE,
            Enum(&LOGICAL_STREAM_TYPE),
            None,
        ),
        field("version", fields::options::VERSION, Uint32, None),
    ],
};

static RDF_STREAM_ROW: MessageDef = MessageDef {
    name: "RdfStreamRow",
    fields: &[
        field(
            "options",
            fields::row::OPTIONS,
            Message(&RDF_STREAM_OPTIONS),
            Some("row"),
        ),
        field(
            "triple",
            fields::row::TRIPLE,
            Message(&RDF_TRIPLE),
            Some("row"),
        ),
        field("quad", fields::row::QUAD, Message(&RDF_QUAD), Some("row")),
        field(
            "graph_start",
            fields::row::GRAPH_START,
            Message(&RDF_GRAPH_START),
            Some("row"),
        ),
        field(
            "graph_end",
            fields::row::GRAPH_END,
            Message(&RDF_GRAPH_END),
            Some("row"),
        ),
        field(
            "namespace",
            fields::row::NAMESPACE,
            Message(&RDF_NAMESPACE_DECLARATION),
            Some("row"),
        ),
        field(
            "name",
            fields::row::NAME,
            Message(&RDF_NAME_ENTRY),
            Some("row"),
        ),
        field(
            "prefix",
            fields::row::PREFIX,
            Message(&RDF_PREFIX_ENTRY),
            Some("row"),
        ),
        field(
            "datatype",
            fields::row::DATATYPE,
            Message(&RDF_DATATYPE_ENTRY),
            Some("row"),
        ),
    ],
};

/// The entry message of `map<string, bytes> metadata`.
static METADATA_ENTRY: MessageDef = MessageDef {
    name: "RdfStreamFrame.MetadataEntry",
    fields: &[
        field("key", fields::frame::MAP_KEY, Str, None),
        field("value", fields::frame::MAP_VALUE, Bytes, None),
    ],
};

/// `RdfStreamFrame`, the root of the schema table: every other message of `rdf.proto`
/// (Jelly-RDF 1.1) is reached from it.
pub static SCHEMA: MessageDef = MessageDef {
    name: "RdfStreamFrame",
    fields: &[
        FieldDef {
            name: "rows",
            number: fields::frame::ROWS,
            kind: Message(&RDF_STREAM_ROW),
            oneof: None,
            repeated: true,
        },
        FieldDef {
            name: "metadata",
            number: fields::frame::METADATA,
            kind: Message(&METADATA_ENTRY),
            oneof: None,
            repeated: true,
        },
    ],
};

/// What went wrong reading or writing `jelly-text`.
#[derive(Debug, Error)]
pub enum TextFormatError {
    /// The text is not a frame of the text format (or breaks a bound).
    #[error("line {line}, column {column}: {message}")]
    Syntax {
        /// Line (from 1).
        line: u64,
        /// Column in characters (from 1).
        column: u64,
        /// What was wrong, and what was expected.
        message: String,
    },
    /// A binary frame is not a protobuf message, so it has no text form.
    #[error("frame {frame}: {source}")]
    Wire {
        /// Index of the frame (from 0).
        frame: u64,
        /// The problem, with its byte offset in the stream.
        source: wire::WireError,
    },
    /// A binary frame has a varint (tag or length at its top level) written in more
    /// bytes than its value needs: text keeps the value, so the bytes would change.
    #[error(
        "frame {frame}: the varint at byte {offset} takes more bytes than its value needs, \
         which the text format cannot keep"
    )]
    Overlong {
        /// Index of the frame (from 0).
        frame: u64,
        /// Offset of the varint in the stream.
        offset: u64,
    },
    /// The text input could not be read.
    #[error("reading the text: {0}")]
    Io(#[from] std::io::Error),
}

// ---------------------------------------------------------------------------------
// Printer

/// Writes frame `index` (its bytes `frame`, found at byte `offset` of the stream) as
/// text to `out`: the comment line `# Frame N`, then its fields. The text goes out a
/// top-level field (a row) at a time, so memory stays within the text of one row.
/// A frame that is not a protobuf message at its top level is an error, found before
/// anything is written.
///
/// ```
/// let mut out = Vec::new();
/// // rows { graph_end { } }
/// jelly::text_format::print_frame(0, &[0x0a, 0x02, 0x2a, 0x00], 0, &mut out).unwrap();
/// assert_eq!(out, b"# Frame 0\nrows {\n  graph_end {\n  }\n}\n");
/// ```
pub fn print_frame<W: std::io::Write>(
    index: u64,
    frame: &[u8],
    offset: u64,
    out: &mut W,
) -> Result<(), TextFormatError> {
    let base = usize::try_from(offset).unwrap_or(usize::MAX);
    let unprintable = |e| match e {
        Unprintable::Wire(source) => TextFormatError::Wire {
            frame: index,
            source,
        },
        Unprintable::Overlong(at) => TextFormatError::Overlong {
            frame: index,
            offset: at as u64,
        },
    };
    let mut check = Reader::with_base(frame, base);
    while let Some((_, wt)) = canonical_tag(&mut check).map_err(unprintable)? {
        match wt {
            WireType::Varint => canonical_varint(&mut check).map(drop),
            WireType::Len => canonical_bytes(&mut check).map(drop),
            _ => check.skip(wt).map_err(Unprintable::Wire),
        }
        .map_err(unprintable)?;
    }
    writeln!(out, "# Frame {index}")?;
    let mut r = Reader::with_base(frame, base);
    let mut text = String::new();
    while !r.is_empty() {
        text.clear();
        print_field(Some(&SCHEMA), &mut r, 0, 1, &mut text).map_err(unprintable)?;
        out.write_all(text.as_bytes())?;
    }
    Ok(())
}

/// Why bytes have no exact text form.
enum Unprintable {
    /// They are not a protobuf message.
    Wire(wire::WireError),
    /// A varint at this offset is longer than its value needs.
    Overlong(usize),
}

impl From<wire::WireError> for Unprintable {
    fn from(e: wire::WireError) -> Self {
        Unprintable::Wire(e)
    }
}

/// Reads a varint written in as few bytes as its value needs: text keeps values, not
/// their encoding, so a longer one could not be written back as it was.
fn canonical_varint(r: &mut Reader<'_>) -> Result<u64, Unprintable> {
    let at = r.offset();
    let v = r.varint()?;
    if r.offset() - at != wire::varint_len(v) {
        return Err(Unprintable::Overlong(at));
    }
    Ok(v)
}

/// Reads a field key, as [`canonical_varint`] reads a varint.
fn canonical_tag(r: &mut Reader<'_>) -> Result<Option<(u32, WireType)>, Unprintable> {
    let at = r.offset();
    let Some((number, wt)) = r.tag()? else {
        return Ok(None);
    };
    let wire_type = match wt {
        WireType::Varint => 0,
        WireType::Fixed64 => 1,
        WireType::Len => 2,
        WireType::Fixed32 => 5,
    };
    if r.offset() - at != wire::varint_len((u64::from(number) << 3) | wire_type) {
        return Err(Unprintable::Overlong(at));
    }
    Ok(Some((number, wt)))
}

/// Reads a length-delimited payload whose length is canonical.
fn canonical_bytes<'a>(r: &mut Reader<'a>) -> Result<&'a [u8], Unprintable> {
    let at = r.offset();
    let b = r.bytes()?;
    if r.offset() - at - b.len() != wire::varint_len(b.len() as u64) {
        return Err(Unprintable::Overlong(at));
    }
    Ok(b)
}

fn indent(out: &mut String, n: usize) {
    out.extend(std::iter::repeat_n(' ', n));
}

/// Prints the fields of one message.
fn print_fields(
    def: Option<&'static MessageDef>,
    mut r: Reader<'_>,
    ind: usize,
    depth: usize,
    out: &mut String,
) -> Result<(), Unprintable> {
    while !r.is_empty() {
        print_field(def, &mut r, ind, depth, out)?;
    }
    Ok(())
}

/// Prints the field at the cursor. A nested message that is not a well-formed message
/// (or nests deeper than [`MAX_TEXT_DEPTH`], or has a varint longer than its value
/// needs) is printed as the bytes it is, by field number: what was printed of it is
/// taken back.
fn print_field(
    def: Option<&'static MessageDef>,
    r: &mut Reader<'_>,
    ind: usize,
    depth: usize,
    out: &mut String,
) -> Result<(), Unprintable> {
    let Some((number, wt)) = canonical_tag(r)? else {
        return Ok(());
    };
    let known = def.and_then(|d| d.by_number(number));
    match (known, wt) {
        (Some(f), WireType::Varint) => {
            let v = canonical_varint(r)?;
            let text = match f.kind {
                Uint32 => u32::try_from(v).ok().map(|v| v.to_string()),
                Bool => match v {
                    0 => Some("false".to_string()),
                    1 => Some("true".to_string()),
                    _ => None,
                },
                Enum(e) => enum_text(e, v),
                _ => None,
            };
            indent(out, ind);
            match text {
                Some(t) => push_scalar(out, f.name, &t),
                None => push_scalar(out, &number.to_string(), &v.to_string()),
            }
        }
        (Some(f), WireType::Len) => {
            let payload = canonical_bytes(r)?;
            let start = r.offset() - payload.len();
            match f.kind {
                Str | Bytes => {
                    indent(out, ind);
                    push_scalar(out, f.name, &quoted(payload));
                }
                Message(m) => {
                    let mark = out.len();
                    indent(out, ind);
                    out.push_str(f.name);
                    out.push_str(" {\n");
                    let nested = depth < MAX_TEXT_DEPTH
                        && print_fields(
                            Some(m),
                            Reader::with_base(payload, start),
                            ind + 2,
                            depth + 1,
                            out,
                        )
                        .is_ok();
                    if nested {
                        indent(out, ind);
                        out.push_str("}\n");
                    } else {
                        out.truncate(mark);
                        indent(out, ind);
                        push_scalar(out, &number.to_string(), &quoted(payload));
                    }
                }
                _ => {
                    indent(out, ind);
                    push_scalar(out, &number.to_string(), &quoted(payload));
                }
            }
        }
        (_, wt) => {
            let value = match wt {
                WireType::Varint => canonical_varint(r)?.to_string(),
                WireType::Len => quoted(canonical_bytes(r)?),
                WireType::Fixed32 => {
                    let b = fixed::<4>(r)?;
                    format!("0x{:08x}", u32::from_le_bytes(b))
                }
                WireType::Fixed64 => {
                    let b = fixed::<8>(r)?;
                    format!("0x{:016x}", u64::from_le_bytes(b))
                }
            };
            indent(out, ind);
            push_scalar(out, &number.to_string(), &value);
        }
    }
    Ok(())
}

fn fixed<const N: usize>(r: &mut Reader<'_>) -> Result<[u8; N], wire::WireError> {
    let mut b = [0u8; N];
    let unread = r.unread();
    if unread.len() < N {
        return Err(wire::WireError::Truncated(r.offset() + unread.len()));
    }
    b.copy_from_slice(&unread[..N]);
    r.skip(if N == 4 {
        WireType::Fixed32
    } else {
        WireType::Fixed64
    })?;
    Ok(b)
}

/// The text of an enum value: its name, or its number when the enum has no such value;
/// `None` when the varint is no `int32` (then the field is printed by number).
fn enum_text(e: &EnumDef, v: u64) -> Option<String> {
    // An int32 is written sign-extended to 64 bits.
    let n = i32::try_from(v as i64).ok()?;
    Some(match e.values.iter().find(|(_, x)| *x == n) {
        Some((name, _)) => (*name).to_string(),
        None => n.to_string(),
    })
}

fn push_scalar(out: &mut String, name: &str, value: &str) {
    out.push_str(name);
    out.push_str(": ");
    out.push_str(value);
    out.push('\n');
}

/// A string literal of `bytes`, escaped as protobuf-java's `TextFormat` does: printable
/// ASCII as is, the C escapes, and every other byte (UTF-8 included) in octal.
fn quoted(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() + 2);
    s.push('"');
    for &b in bytes {
        match b {
            0x07 => s.push_str("\\a"),
            0x08 => s.push_str("\\b"),
            0x0c => s.push_str("\\f"),
            b'\n' => s.push_str("\\n"),
            b'\r' => s.push_str("\\r"),
            b'\t' => s.push_str("\\t"),
            0x0b => s.push_str("\\v"),
            b'\\' => s.push_str("\\\\"),
            b'\'' => s.push_str("\\'"),
            b'"' => s.push_str("\\\""),
            0x20..=0x7e => s.push(char::from(b)),
            _ => {
                s.push('\\');
                s.push(char::from(b'0' + (b >> 6)));
                s.push(char::from(b'0' + ((b >> 3) & 7)));
                s.push(char::from(b'0' + (b & 7)));
            }
        }
    }
    s.push('"');
    s
}

// ---------------------------------------------------------------------------------
// Frames of a text stream

/// Reads a `jelly-text` stream frame by frame, in memory bounded by the frame limit.
///
/// ```
/// use jelly::text_format::TextFrameReader;
/// let text = "# Frame 0\nrows { graph_end {} }\n# Frame 1\n";
/// let mut r = TextFrameReader::new(text.as_bytes(), 1 << 20);
/// assert_eq!(r.next_frame().unwrap(), Some(vec![0x0a, 0x02, 0x2a, 0x00]));
/// assert_eq!(r.next_frame().unwrap(), Some(vec![])); // an empty frame
/// assert_eq!(r.next_frame().unwrap(), None);
/// ```
pub struct TextFrameReader<R: BufRead> {
    inner: R,
    max_frame_bytes: u64,
    max_text_bytes: u64,
    /// Lines read so far.
    lines: u64,
    /// A `# Frame` line read but not used yet, and its line number: it starts the
    /// next frame.
    pending: Option<(Vec<u8>, u64)>,
    /// The end of the text was reached.
    eof: bool,
}

impl<R: BufRead> TextFrameReader<R> {
    /// A reader whose frames may be at most `max_frame_bytes` once encoded.
    pub fn new(inner: R, max_frame_bytes: u64) -> Self {
        TextFrameReader {
            inner,
            max_frame_bytes,
            max_text_bytes: max_frame_bytes.saturating_mul(16).max(1 << 20),
            lines: 0,
            pending: None,
            eof: false,
        }
    }

    /// Lines read so far.
    pub fn lines_read(&self) -> u64 {
        self.lines
    }

    /// The next frame's bytes (the frame message, without a length prefix), or `None`
    /// at the end of the text.
    pub fn next_frame(&mut self) -> Result<Option<Vec<u8>>, TextFormatError> {
        loop {
            if self.eof && self.pending.is_none() {
                return Ok(None);
            }
            let (mut text, first_line, from_marker) = match self.pending.take() {
                Some((line, n)) => (line, n, true),
                None => (Vec::new(), self.lines + 1, false),
            };
            let mut has_field = false;
            while !self.eof {
                let start = text.len();
                let room = self.max_text_bytes.saturating_sub(start as u64) + 1;
                let n = std::io::Read::take(&mut self.inner, room).read_until(b'\n', &mut text)?;
                if text.len() as u64 > self.max_text_bytes {
                    self.eof = true;
                    return Err(TextFormatError::Syntax {
                        line: first_line,
                        column: 1,
                        message: format!(
                            "the text of this frame is over {} bytes (16 times the frame limit)",
                            self.max_text_bytes
                        ),
                    });
                }
                if n == 0 {
                    self.eof = true;
                    break;
                }
                self.lines += 1;
                let line = text[start..].trim_ascii();
                if line.starts_with(b"# Frame") {
                    self.pending = Some((text.split_off(start), self.lines));
                    break;
                }
                if !line.is_empty() && !line.starts_with(b"#") {
                    has_field = true;
                }
            }
            // Text before the first `# Frame` line is a frame only if it has a field
            // (a header comment is not).
            if from_marker || has_field {
                return self.parse(&text, first_line).map(Some);
            }
        }
    }

    fn parse(&self, text: &[u8], first_line: u64) -> Result<Vec<u8>, TextFormatError> {
        parse_bytes(text, first_line, self.max_frame_bytes)
    }
}

fn parse_bytes(text: &[u8], first_line: u64, max_bytes: u64) -> Result<Vec<u8>, TextFormatError> {
    let mut p = Parser {
        text,
        pos: 0,
        first_line,
        max_bytes,
    };
    let mut out = Vec::new();
    p.message(Some(&SCHEMA), None, 1, &mut out)?;
    Ok(out)
}

/// Parses the text of one frame (no `# Frame` splitting) into the frame's bytes.
///
/// ```
/// let bytes = jelly::text_format::parse_frame("rows { graph_end {} }", 1 << 20).unwrap();
/// assert_eq!(bytes, [0x0a, 0x02, 0x2a, 0x00]);
/// ```
pub fn parse_frame(text: &str, max_frame_bytes: u64) -> Result<Vec<u8>, TextFormatError> {
    parse_bytes(text.as_bytes(), 1, max_frame_bytes)
}

/// A field name: of the schema, or a number (a field written as given).
enum FieldRef {
    Known(&'static FieldDef),
    Number(u32),
}

struct Parser<'t> {
    text: &'t [u8],
    pos: usize,
    first_line: u64,
    max_bytes: u64,
}

impl Parser<'_> {
    fn err_at(&self, at: usize, message: impl Into<String>) -> TextFormatError {
        let p = position_in(self.text, at);
        TextFormatError::Syntax {
            line: p.line + self.first_line - 1,
            column: p.column,
            message: message.into(),
        }
    }

    fn err(&self, message: impl Into<String>) -> TextFormatError {
        self.err_at(self.pos, message)
    }

    /// What is at the cursor, for "expected X, found Y".
    fn found(&self) -> String {
        match self.text.get(self.pos) {
            None => "the end of the frame".to_string(),
            Some(&b) if b.is_ascii_graphic() => format!("`{}`", char::from(b)),
            Some(b'\n') => "the end of the line".to_string(),
            Some(&b) => format!("byte 0x{b:02x}"),
        }
    }

    fn skip_space(&mut self) {
        while let Some(&b) = self.text.get(self.pos) {
            if b == b'#' {
                while self.text.get(self.pos).is_some_and(|&c| c != b'\n') {
                    self.pos += 1;
                }
            } else if b.is_ascii_whitespace() {
                self.pos += 1;
            } else {
                break;
            }
        }
    }

    fn peek(&self) -> Option<u8> {
        self.text.get(self.pos).copied()
    }

    fn eat(&mut self, b: u8) -> bool {
        if self.peek() == Some(b) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn check_size(&self, len: usize) -> Result<(), TextFormatError> {
        if len as u64 > self.max_bytes {
            return Err(self.err(format!(
                "the frame is over {} bytes, the frame limit (--max-frame-size)",
                self.max_bytes
            )));
        }
        Ok(())
    }

    /// Parses fields until `close` (or the end of the text, when `close` is `None`),
    /// appending their bytes to `out`.
    fn message(
        &mut self,
        def: Option<&'static MessageDef>,
        close: Option<u8>,
        depth: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), TextFormatError> {
        loop {
            self.skip_space();
            match (self.peek(), close) {
                (None, None) => return Ok(()),
                (None, Some(c)) => {
                    return Err(self.err(format!(
                        "expected a field or `{}`, found the end of the frame",
                        char::from(c)
                    )));
                }
                (Some(b), Some(c)) if b == c => {
                    self.pos += 1;
                    return Ok(());
                }
                _ => {}
            }
            self.field(def, depth, out)?;
            self.check_size(out.len())?;
            self.skip_space();
            if !self.eat(b';') {
                self.eat(b',');
            }
        }
    }

    fn field(
        &mut self,
        def: Option<&'static MessageDef>,
        depth: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), TextFormatError> {
        let f = self.field_name(def)?;
        self.skip_space();
        let colon = self.eat(b':');
        self.skip_space();
        if self.peek() == Some(b'[') {
            if !colon && !self.is_message(&f) {
                return Err(self.err(format!(
                    "expected `:` after the field name, found {}",
                    self.found()
                )));
            }
            self.pos += 1;
            self.skip_space();
            if self.eat(b']') {
                return Ok(());
            }
            loop {
                self.value(&f, true, depth, out)?;
                self.check_size(out.len())?;
                self.skip_space();
                if self.eat(b']') {
                    return Ok(());
                }
                if !self.eat(b',') {
                    return Err(self.err(format!(
                        "expected `,` or `]` in a list, found {}",
                        self.found()
                    )));
                }
                self.skip_space();
            }
        }
        self.value(&f, colon, depth, out)
    }

    fn is_message(&self, f: &FieldRef) -> bool {
        match f {
            FieldRef::Known(d) => matches!(d.kind, Message(_)),
            FieldRef::Number(_) => true,
        }
    }

    fn field_name(
        &mut self,
        def: Option<&'static MessageDef>,
    ) -> Result<FieldRef, TextFormatError> {
        let start = self.pos;
        match self.peek() {
            Some(b) if b.is_ascii_digit() => {
                while self.peek().is_some_and(|b| b.is_ascii_alphanumeric()) {
                    self.pos += 1;
                }
                let text = std::str::from_utf8(&self.text[start..self.pos]).unwrap_or("");
                // Up to what a key on the wire can hold (protobuf itself stops at
                // 2^29 - 1), so that any field read from bytes can be written back.
                match text.parse::<u32>() {
                    Ok(n) if n >= 1 => Ok(FieldRef::Number(n)),
                    _ => Err(self.err_at(
                        start,
                        format!("`{text}` is no field number (1 to {})", u32::MAX),
                    )),
                }
            }
            Some(b) if b.is_ascii_alphabetic() || b == b'_' => {
                while self
                    .peek()
                    .is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_')
                {
                    self.pos += 1;
                }
                let name = std::str::from_utf8(&self.text[start..self.pos]).unwrap_or("");
                let Some(d) = def else {
                    return Err(self.err_at(
                        start,
                        format!(
                            "unknown field `{name}`: inside a field given by number, fields are \
                             given by number too"
                        ),
                    ));
                };
                match d.by_name(name) {
                    Some(f) => Ok(FieldRef::Known(f)),
                    None => {
                        let names: Vec<&str> = d.fields.iter().map(|f| f.name).collect();
                        let expected = if names.is_empty() {
                            "it has no fields".to_string()
                        } else {
                            format!("expected one of {}", names.join(", "))
                        };
                        Err(self.err_at(
                            start,
                            format!(
                                "unknown field `{name}` in {} ({expected}, or a field number)",
                                d.name
                            ),
                        ))
                    }
                }
            }
            Some(b'[') => {
                Err(self
                    .err("extension and Any fields (`[name]`) are not in rdf.proto, so not taken"))
            }
            _ => Err(self.err(format!("expected a field name, found {}", self.found()))),
        }
    }

    fn value(
        &mut self,
        f: &FieldRef,
        colon: bool,
        depth: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), TextFormatError> {
        let at = self.pos;
        let (number, kind) = match f {
            FieldRef::Known(d) => (d.number, Some(d.kind)),
            FieldRef::Number(n) => (*n, None),
        };
        if let Some(open @ (b'{' | b'<')) = self.peek() {
            let sub_def = match kind {
                Some(Message(m)) => Some(m),
                None => None,
                Some(_) => {
                    return Err(self.err(format!("expected a value, found `{}`", char::from(open))));
                }
            };
            if depth >= MAX_TEXT_DEPTH {
                return Err(self.err(format!(
                    "messages nested deeper than {MAX_TEXT_DEPTH} levels"
                )));
            }
            self.pos += 1;
            let close = if open == b'{' { b'}' } else { b'>' };
            let mut sub = Vec::new();
            self.message(sub_def, Some(close), depth + 1, &mut sub)?;
            wire::put_bytes_field(out, number, &sub);
            return Ok(());
        }
        if let Some(Message(m)) = kind {
            return Err(self.err(format!(
                "expected `{{` to open {} (a message), found {}",
                m.name,
                self.found()
            )));
        }
        if !colon {
            return Err(self.err(format!(
                "expected `:` after the field name, found {}",
                self.found()
            )));
        }
        match kind {
            Some(Str | Bytes) => {
                let s = self.strings()?;
                wire::put_bytes_field(out, number, &s);
            }
            Some(Uint32) => {
                let v = self.unsigned()?;
                let v = u32::try_from(v)
                    .map_err(|_| self.err_at(at, format!("{v} is out of range for uint32")))?;
                wire::put_tag(out, number, WireType::Varint);
                wire::put_varint(out, u64::from(v));
            }
            Some(Bool) => {
                let v = if self.peek().is_some_and(|b| b.is_ascii_digit()) {
                    match self.unsigned()? {
                        v @ (0 | 1) => v,
                        _ => return Err(self.err_at(at, "expected a bool: true, false, 1 or 0")),
                    }
                } else {
                    match self.ident().as_str() {
                        "true" | "True" | "t" => 1,
                        "false" | "False" | "f" => 0,
                        _ => return Err(self.err_at(at, "expected a bool: true, false, 1 or 0")),
                    }
                };
                wire::put_tag(out, number, WireType::Varint);
                wire::put_varint(out, v);
            }
            Some(Enum(e)) => {
                let n: i32 = if self.peek().is_some_and(|b| b.is_ascii_digit() || b == b'-') {
                    let neg = self.eat(b'-');
                    let v = self.unsigned()?;
                    let v = if neg { -(v as i128) } else { v as i128 };
                    i32::try_from(v).map_err(|_| {
                        self.err_at(at, format!("{v} is out of range for an enum (int32)"))
                    })?
                } else {
                    let name = self.ident();
                    match e.values.iter().find(|(n, _)| *n == name) {
                        Some((_, v)) => *v,
                        None => {
                            let names: Vec<&str> = e.values.iter().map(|(n, _)| *n).collect();
                            return Err(self.err_at(
                                at,
                                format!(
                                    "expected a {} value ({}, or a number), found {}",
                                    e.name,
                                    names.join(", "),
                                    if name.is_empty() {
                                        self.found()
                                    } else {
                                        format!("`{name}`")
                                    }
                                ),
                            ));
                        }
                    }
                };
                wire::put_tag(out, number, WireType::Varint);
                wire::put_varint(out, i64::from(n) as u64);
            }
            Some(Message(_)) => {} // handled above
            None => match self.peek() {
                Some(b'"' | b'\'') => {
                    let s = self.strings()?;
                    wire::put_bytes_field(out, number, &s);
                }
                Some(b'0') if matches!(self.text.get(self.pos + 1), Some(b'x' | b'X')) => {
                    let digits = self.text[self.pos + 2..]
                        .iter()
                        .take_while(|b| b.is_ascii_hexdigit())
                        .count();
                    let v = self.unsigned()?;
                    match digits {
                        8 => {
                            let v =
                                u32::try_from(v).map_err(|_| self.err_at(at, "out of range"))?;
                            wire::put_tag(out, number, WireType::Fixed32);
                            out.extend_from_slice(&v.to_le_bytes());
                        }
                        16 => {
                            wire::put_tag(out, number, WireType::Fixed64);
                            out.extend_from_slice(&v.to_le_bytes());
                        }
                        _ => {
                            wire::put_tag(out, number, WireType::Varint);
                            wire::put_varint(out, v);
                        }
                    }
                }
                Some(b'-') => {
                    self.pos += 1;
                    let v = self.unsigned()?;
                    let n = i64::try_from(v)
                        .ok()
                        .and_then(|v| v.checked_neg())
                        .ok_or_else(|| self.err_at(at, "out of range for a 64-bit integer"))?;
                    wire::put_tag(out, number, WireType::Varint);
                    wire::put_varint(out, n as u64);
                }
                Some(b) if b.is_ascii_digit() => {
                    let v = self.unsigned()?;
                    wire::put_tag(out, number, WireType::Varint);
                    wire::put_varint(out, v);
                }
                _ => {
                    return Err(self.err(format!(
                        "expected a number, a string or `{{` for field {number}, found {}",
                        self.found()
                    )));
                }
            },
        }
        Ok(())
    }

    fn ident(&mut self) -> String {
        let start = self.pos;
        while self
            .peek()
            .is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_')
        {
            self.pos += 1;
        }
        String::from_utf8_lossy(&self.text[start..self.pos]).into_owned()
    }

    /// An unsigned integer: decimal, hex `0x…` or octal `0…`, up to 64 bits.
    fn unsigned(&mut self) -> Result<u64, TextFormatError> {
        let start = self.pos;
        let (radix, digits_from) = match (self.peek(), self.text.get(self.pos + 1)) {
            (Some(b'0'), Some(b'x' | b'X')) => (16, self.pos + 2),
            (Some(b'0'), Some(b'0'..=b'9')) => (8, self.pos + 1),
            (Some(b'0'..=b'9'), _) => (10, self.pos),
            _ => return Err(self.err(format!("expected a number, found {}", self.found()))),
        };
        self.pos = digits_from;
        while self
            .peek()
            .is_some_and(|b| b.is_ascii_alphanumeric() || b == b'.')
        {
            self.pos += 1;
        }
        let digits = std::str::from_utf8(&self.text[digits_from..self.pos]).unwrap_or("");
        let text = String::from_utf8_lossy(&self.text[start..self.pos]).into_owned();
        if digits.is_empty() {
            return Err(self.err_at(start, format!("`{text}` is no integer")));
        }
        u64::from_str_radix(digits, radix).map_err(|e| {
            let why = match e.kind() {
                std::num::IntErrorKind::PosOverflow => "is over 64 bits",
                _ => "is no integer (decimal, 0x hex or 0 octal)",
            };
            self.err_at(start, format!("`{text}` {why}"))
        })
    }

    /// One or more adjacent string literals, concatenated.
    fn strings(&mut self) -> Result<Vec<u8>, TextFormatError> {
        let mut out = Vec::new();
        if !matches!(self.peek(), Some(b'"' | b'\'')) {
            return Err(self.err(format!("expected a string, found {}", self.found())));
        }
        while let Some(q @ (b'"' | b'\'')) = self.peek() {
            self.pos += 1;
            self.string_body(q, &mut out)?;
            self.check_size(out.len())?;
            self.skip_space();
        }
        Ok(out)
    }

    fn string_body(&mut self, quote: u8, out: &mut Vec<u8>) -> Result<(), TextFormatError> {
        let open = self.pos - 1;
        loop {
            let Some(b) = self.peek() else {
                return Err(self.err_at(open, "string not closed before the end of the frame"));
            };
            match b {
                b'\n' => {
                    return Err(self.err_at(open, "string not closed before the end of the line"));
                }
                b'\\' => {
                    self.pos += 1;
                    self.escape(out)?;
                }
                _ if b == quote => {
                    self.pos += 1;
                    return Ok(());
                }
                _ => {
                    out.push(b);
                    self.pos += 1;
                }
            }
        }
    }

    fn escape(&mut self, out: &mut Vec<u8>) -> Result<(), TextFormatError> {
        let at = self.pos - 1;
        let Some(c) = self.peek() else {
            return Err(self.err_at(at, "string not closed before the end of the frame"));
        };
        self.pos += 1;
        let simple = match c {
            b'a' => Some(0x07),
            b'b' => Some(0x08),
            b'f' => Some(0x0c),
            b'n' => Some(b'\n'),
            b'r' => Some(b'\r'),
            b't' => Some(b'\t'),
            b'v' => Some(0x0b),
            b'\\' | b'\'' | b'"' | b'?' => Some(c),
            _ => None,
        };
        if let Some(s) = simple {
            out.push(s);
            return Ok(());
        }
        match c {
            b'0'..=b'7' => {
                let mut v = u32::from(c - b'0');
                for _ in 0..2 {
                    match self.peek() {
                        Some(d @ b'0'..=b'7') => {
                            v = v * 8 + u32::from(d - b'0');
                            self.pos += 1;
                        }
                        _ => break,
                    }
                }
                let b = u8::try_from(v)
                    .map_err(|_| self.err_at(at, format!("octal escape \\{v:o} is over 255")))?;
                out.push(b);
            }
            b'x' | b'X' => {
                let v = self.hex_digits(2, 1, at, "\\x")?;
                out.push(v as u8);
            }
            b'u' | b'U' => {
                let n = if c == b'u' { 4 } else { 8 };
                let v = self.hex_digits(n, n, at, if c == b'u' { "\\u" } else { "\\U" })?;
                let ch = char::from_u32(v).ok_or_else(|| {
                    self.err_at(
                        at,
                        format!("\\{}{v:X} is no Unicode scalar value", char::from(c)),
                    )
                })?;
                let mut buf = [0u8; 4];
                out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
            }
            other => {
                return Err(self.err_at(
                    at,
                    format!(
                        "unknown escape `\\{}` (expected one of \\a \\b \\f \\n \\r \\t \\v \\\\ \\' \\\" \\? \\NNN \\xNN \\uXXXX \\UXXXXXXXX)",
                        char::from(other)
                    ),
                ));
            }
        }
        Ok(())
    }

    fn hex_digits(
        &mut self,
        max: usize,
        min: usize,
        at: usize,
        what: &str,
    ) -> Result<u32, TextFormatError> {
        let mut v = 0u32;
        let mut n = 0;
        while n < max {
            match self.peek().and_then(|b| char::from(b).to_digit(16)) {
                Some(d) => {
                    v = v * 16 + d;
                    self.pos += 1;
                    n += 1;
                }
                None => break,
            }
        }
        if n < min {
            return Err(self.err_at(at, format!("{what} escape needs {min} hex digits")));
        }
        Ok(v)
    }
}
