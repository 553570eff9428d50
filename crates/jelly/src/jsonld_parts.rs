//! JSON-LD input cut into documents that a JSON-LD parser can hold whole.
//!
//! Why: the JSON-LD parser (oxjsonld, without its streaming profile) holds a top-level
//! object whole before it expands it, at about twenty times its size: a 244 MB
//! `{"@context": …, "@graph": [ … ]}` took 4.9 GB. Its streaming profile holds
//! nothing, but refuses valid documents whose keys are not in its order (`{"@id": …,
//! "@type": …}` among them, 44 of the 468 W3C toRdf tests), after emitting some of
//! their statements: it cannot be used for documents of unknown order. (Where it
//! accepts a test, it gives the statements the parser gives without it.)
//!
//! So a document is read as follows:
//! - a top-level array is cut between its elements into arrays of about
//!   [`BATCH_BYTES`] (or of what has arrived, so a slow input is not held back), each
//!   parsed alone: the elements of a top-level array are expanded each on its own, so
//!   this changes nothing;
//! - a top-level object of up to [`MAX_JSONLD_HELD`] bytes is parsed whole, as before;
//! - a larger one is cut in the same way if it holds `"@graph"` last, after nothing
//!   but `"@context"` and `"@id"`: each part is `{"@context": …, "@id": …, "@graph":
//!   [ part ]}`, which states what the whole does for the nodes of that part (the same
//!   context, the same graph; blank node labels are kept as written, so they join up
//!   across parts). Any other larger object is refused: it would be held whole.
//!
//! A single element or node over [`MAX_JSONLD_HELD`] is refused too. Each node starts
//! a line of its part, so a position in a part tells where in the input it is.

use std::io::{self, BufRead, BufReader, Cursor, Read};

/// The largest JSON-LD object held whole: a document whose top level is an object,
/// or one element of a top-level array or node of a `@graph`. The parser takes about
/// 22 times as much (a 14 MB document 326 MB, a 58 MB one 1.27 GB); the JSON parser
/// under it holds a token of up to as much.
pub const MAX_JSONLD_HELD: usize = 16 << 20;

/// About how many bytes of elements or nodes one part holds.
pub const BATCH_BYTES: usize = 1 << 20;

/// A place in the input: byte offset, 1-based line and column (in bytes, as the JSON
/// parser counts them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Place {
    /// Byte offset.
    pub offset: u64,
    /// 1-based line.
    pub line: u64,
    /// 1-based column, in bytes.
    pub column: u64,
}

/// One document to parse.
#[derive(Debug)]
pub struct Part {
    /// The document.
    pub text: Vec<u8>,
    /// Where its pieces are in the input.
    pub map: PartMap,
}

/// Where the pieces of a [`Part`] copied from the input (the context, the graph's
/// `@id`, each node or element) are.
#[derive(Debug, Clone, Default)]
pub struct PartMap {
    /// For each piece, in the order of the part, the 0-based line of the part it
    /// starts (at its first column), and its place in the input.
    pub pieces: Vec<(u64, Place)>,
    /// How many of them come before the first node or element.
    pub head: usize,
    /// The part is the whole input (one piece, its start).
    pub whole: bool,
}

impl PartMap {
    /// Where the 0-based `line` and `column` of the part are in the input (1-based),
    /// or `None` before the first piece.
    ///
    /// ```
    /// use jelly::jsonld_parts::{PartMap, Place};
    /// let at = |line, column| Place { offset: 0, line, column };
    /// let map = PartMap { pieces: vec![(1, at(3, 5)), (4, at(9, 1))], head: 0, whole: false };
    /// assert_eq!(map.place_of(0, 7), None);
    /// assert_eq!(map.place_of(1, 2), Some((3, 7)));
    /// assert_eq!(map.place_of(2, 2), Some((4, 3)));
    /// assert_eq!(map.place_of(5, 0), Some((10, 1)));
    /// ```
    pub fn place_of(&self, line: u64, column: u64) -> Option<(u64, u64)> {
        let i = self.pieces.partition_point(|(l, _)| *l <= line);
        let (start, at) = self.pieces.get(i.checked_sub(1)?)?;
        Some(if line == *start {
            (at.line, at.column + column)
        } else {
            (at.line + (line - start), column + 1)
        })
    }

    /// The places of the first and the last node or element, if any.
    pub fn nodes(&self) -> Option<(Place, Place)> {
        let nodes = self.pieces.get(self.head..)?;
        Some((nodes.first()?.1, nodes.last()?.1))
    }

    /// Where in the input an error of the parser is, from the 0-based line and column
    /// in the part it gives, if any.
    pub fn error_place(&self, location: Option<(u64, u64)>) -> ErrorPlace {
        if let Some((line, column)) = location.and_then(|(l, c)| self.place_of(l, c)) {
            return ErrorPlace::At { line, column };
        }
        match self.nodes() {
            Some((first, last)) if !self.whole => ErrorPlace::Nodes { first, last },
            _ => ErrorPlace::Unknown,
        }
    }

    /// The message of an error of the parser, `text`, without the place in the part
    /// that the JSON parser writes into it (`Parser error at line …: `), which is not
    /// the place in the input when the part was cut from it.
    ///
    /// ```
    /// use jelly::jsonld_parts::PartMap;
    /// let cut = PartMap::default();
    /// assert_eq!(cut.message("Parser error at line 4 column 2: true expected"), "true expected");
    /// let whole = PartMap { whole: true, ..PartMap::default() };
    /// assert_eq!(whole.message("Parser error at line 4 column 2: x"), "Parser error at line 4 column 2: x");
    /// ```
    pub fn message<'a>(&self, text: &'a str) -> &'a str {
        match text.strip_prefix("Parser error ") {
            Some(rest) if !self.whole => rest.split_once(": ").map_or(text, |(_, m)| m),
            _ => text,
        }
    }
}

/// Where in the input an error found in a [`Part`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorPlace {
    /// At this 1-based line and column.
    At {
        /// Line.
        line: u64,
        /// Column (bytes).
        column: u64,
    },
    /// Somewhere in the nodes or elements of the part, from the first to the last.
    Nodes {
        /// Where the first starts.
        first: Place,
        /// Where the last starts.
        last: Place,
    },
    /// The parser tells nothing, and the part is the whole input.
    Unknown,
}

impl std::fmt::Display for ErrorPlace {
    /// `line L column C`, `line L (byte offset O)` or `lines L-M (from byte offset O)`;
    /// nothing when unknown.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ErrorPlace::At { line, column } => write!(f, "line {line} column {column}"),
            ErrorPlace::Nodes { first, last } if first.line == last.line => {
                write!(f, "line {} (byte offset {})", first.line, first.offset)
            }
            ErrorPlace::Nodes { first, last } => write!(
                f,
                "lines {}-{} (from byte offset {})",
                first.line, last.line, first.offset
            ),
            ErrorPlace::Unknown => Ok(()),
        }
    }
}

/// Why a JSON-LD parser of this project refuses a remote context (`"@context":
/// "https://…"`): the error of the document loader that the CLI and the server give
/// their parsers (`with_document_loader(|_| Err(REMOTE_CONTEXT_REFUSED.into()))`).
///
/// Why a loader at all: reading a file or a publisher's body must not make network
/// requests on its behalf (a server would fetch any URL a publisher names), and
/// without one the parser says only "No LoadDocumentCallback has been set to load
/// remote contexts", which names neither the context nor what to do. With it the
/// parser's error reads "Failed to load remote context `<url>`: " and this text.
pub const REMOTE_CONTEXT_REFUSED: &str = "remote JSON-LD contexts are not fetched: copy the \
     context's content into the document's \"@context\"";

/// Why the input cannot be cut or read.
#[derive(Debug, thiserror::Error)]
pub enum JsonLdInputError {
    /// Reading failed.
    #[error(transparent)]
    Io(#[from] io::Error),
    /// The input is refused.
    #[error("line {}, byte offset {}: {message}", .at.line, .at.offset)]
    Refused {
        /// Where.
        at: Place,
        /// Why.
        message: String,
    },
}

/// How the rest of the input is cut.
enum Shape {
    /// Not known yet: nothing read.
    Unknown,
    /// The whole input, to parse as one document, and where it starts.
    Whole(Vec<u8>, Place),
    /// A top-level array: parts are arrays.
    Array,
    /// A top-level object with `@graph` last: parts are `head` (`{"@context": …,
    /// "@id": …, "@graph": [`) and nodes.
    Graph {
        head: Vec<u8>,
        map: PartMap,
    },
    Done,
}

/// Bytes read ahead and held, to be read again, then the rest of the input.
struct Replay<R> {
    held: Cursor<Vec<u8>>,
    rest: R,
}

impl<R: Read> Read for Replay<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self.held.read(buf)? {
            0 => self.rest.read(buf),
            n => Ok(n),
        }
    }
}

/// A limit in bytes, for messages.
fn size(bytes: usize) -> String {
    if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{bytes} bytes")
    }
}

/// The input, with where the next byte stands.
struct Source<R> {
    inner: BufReader<R>,
    at: Place,
}

impl<R: Read> Source<R> {
    fn peek(&mut self) -> io::Result<Option<u8>> {
        Ok(self.inner.fill_buf()?.first().copied())
    }

    /// Takes `n` bytes that are in the buffer (seen through `fill_buf`), moving the
    /// place past them.
    fn take(&mut self, n: usize, out: Option<&mut Vec<u8>>) {
        let bytes = &self.inner.buffer()[..n];
        for &b in bytes {
            if b == b'\n' {
                self.at.line += 1;
                self.at.column = 1;
            } else {
                self.at.column += 1;
            }
        }
        if let Some(out) = out {
            out.extend_from_slice(bytes);
        }
        self.at.offset += n as u64;
        self.inner.consume(n);
    }

    fn skip_whitespace(&mut self) -> io::Result<()> {
        loop {
            let buf = self.inner.fill_buf()?;
            let n = buf
                .iter()
                .position(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
                .unwrap_or(buf.len());
            if n == 0 {
                return Ok(());
            }
            self.take(n, None);
        }
    }

    /// True if nothing more can be taken without reading.
    fn drained(&self) -> bool {
        self.inner.buffer().is_empty()
    }

    fn refused(&self, message: impl Into<String>) -> JsonLdInputError {
        JsonLdInputError::Refused {
            at: self.at,
            message: message.into(),
        }
    }

    /// Copies one JSON value (after whitespace) to `out`, refusing one over `max`
    /// bytes. Only its extent is checked (strings, escapes, brackets): the parser
    /// checks the rest.
    fn value(&mut self, out: &mut Vec<u8>, max: usize) -> Result<(), JsonLdInputError> {
        let start = self.at;
        let from = out.len();
        let mut depth = 0usize;
        let mut in_string = false;
        let mut escaped = false;
        let mut scalar = false;
        loop {
            let buf = self.inner.fill_buf()?;
            if buf.is_empty() {
                return if scalar {
                    Ok(())
                } else {
                    Err(self.refused("the JSON ends inside a value"))
                };
            }
            let mut n = 0;
            let mut done = false;
            for &b in buf {
                if in_string {
                    n += 1;
                    if escaped {
                        escaped = false;
                    } else if b == b'\\' {
                        escaped = true;
                    } else if b == b'"' {
                        in_string = false;
                        if depth == 0 {
                            done = true;
                            break;
                        }
                    }
                    continue;
                }
                if scalar {
                    if matches!(b, b',' | b']' | b'}' | b' ' | b'\t' | b'\n' | b'\r') {
                        done = true;
                        break;
                    }
                    n += 1;
                    continue;
                }
                match b {
                    b'"' => in_string = true,
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' if depth > 0 => depth -= 1,
                    _ if depth == 0 => scalar = true,
                    _ => {}
                }
                n += 1;
                if depth == 0 && !in_string && !scalar {
                    done = true;
                    break;
                }
            }
            if out.len() - from + n > max {
                return Err(JsonLdInputError::Refused {
                    at: start,
                    message: format!(
                        "a JSON-LD value of over {}, which the parser would hold whole (one \
                         element of a top-level array, one node of a @graph, or a context); \
                         write the data as N-Triples or N-Quads instead",
                        size(max)
                    ),
                });
            }
            self.take(n, Some(out));
            if done {
                return Ok(());
            }
        }
    }

    /// Takes `byte` if the input goes on with it.
    fn eat(&mut self, byte: &[u8; 1]) -> io::Result<bool> {
        if self.peek()? == Some(byte[0]) {
            self.take(1, None);
            return Ok(true);
        }
        Ok(false)
    }
}

/// The documents of one JSON-LD input.
///
/// ```
/// use jelly::jsonld_parts::JsonLdParts;
/// let doc = br#"{"@context": {"ex": "http://ex/"}, "@graph": [{"@id": "ex:a"}, {"@id": "ex:b"}]}"#;
/// let mut parts = JsonLdParts::with_limits(&doc[..], 40, 1);
/// let one = parts.next_part().unwrap().unwrap();
/// assert_eq!(
///     String::from_utf8(one.text).unwrap(),
///     "{\"@context\":\n{\"ex\": \"http://ex/\"}\n,\"@graph\":[\n{\"@id\": \"ex:a\"}]}"
/// );
/// assert!(parts.next_part().unwrap().is_some());
/// assert!(parts.next_part().unwrap().is_none());
/// ```
pub struct JsonLdParts<R> {
    source: Source<Replay<R>>,
    shape: Shape,
    max_held: usize,
    batch: usize,
}

impl<R: Read> JsonLdParts<R> {
    /// The parts of `input`, with the default limits.
    pub fn new(input: R) -> JsonLdParts<R> {
        JsonLdParts::with_limits(input, MAX_JSONLD_HELD, BATCH_BYTES)
    }

    /// The parts of `input`, holding objects of up to `max_held` bytes whole, in parts
    /// of about `batch` bytes. Nothing is read yet.
    pub fn with_limits(input: R, max_held: usize, batch: usize) -> JsonLdParts<R> {
        // A part ends where the buffer runs dry, too: its size is about one part.
        let source = Source {
            inner: BufReader::with_capacity(
                batch.max(4096),
                Replay {
                    held: Cursor::new(Vec::new()),
                    rest: input,
                },
            ),
            at: Place {
                offset: 0,
                line: 1,
                column: 1,
            },
        };
        JsonLdParts {
            source,
            shape: Shape::Unknown,
            max_held,
            batch,
        }
    }

    /// Reads enough of the input to know how to cut it.
    fn find_shape(&mut self) -> Result<Shape, JsonLdInputError> {
        let source = &mut self.source;
        source.skip_whitespace()?;
        Ok(match source.peek()? {
            Some(b'[') => {
                source.take(1, None);
                Shape::Array
            }
            Some(b'{') => Self::object_shape(source, self.max_held)?,
            // Not JSON-LD: the parser says what is wrong.
            _ => {
                let start = source.at;
                let mut all = Vec::new();
                source
                    .inner
                    .by_ref()
                    .take(self.max_held as u64 + 1)
                    .read_to_end(&mut all)?;
                Shape::Whole(all, start)
            }
        })
    }

    /// A top-level object: whole if it fits, else cut if it has the shape for it.
    fn object_shape(
        source: &mut Source<Replay<R>>,
        max_held: usize,
    ) -> Result<Shape, JsonLdInputError> {
        let start = source.at;
        let mut held = Vec::new();
        source
            .inner
            .by_ref()
            .take(max_held as u64 + 1)
            .read_to_end(&mut held)?;
        if held.len() <= max_held {
            return Ok(Shape::Whole(held, start));
        }
        // Too large to hold: read it again from the start (what was held, then what the
        // buffer has past it, then the rest), to cut it.
        held.extend_from_slice(source.inner.buffer());
        let n = source.inner.buffer().len();
        source.inner.consume(n);
        source.inner.get_mut().held = Cursor::new(held);
        let not_cut = |at: Place| JsonLdInputError::Refused {
            at,
            message: format!(
                "a JSON-LD document of over {0} is read in parts only if it is a top-level \
                 array, or an object of \"@context\", \"@id\" and \"@graph\" (an array, last), \
                 of elements or nodes of up to {0}; the parser would hold this one whole \
                 (write it so, or as N-Triples or N-Quads)",
                size(max_held)
            ),
        };
        if !source.eat(b"{")? {
            return Err(not_cut(source.at));
        }
        let mut head = b"{".to_vec();
        let mut map = PartMap::default();
        let mut keys_seen = Vec::new();
        loop {
            source.skip_whitespace()?;
            if source.peek()? != Some(b'"') {
                return Err(not_cut(source.at));
            }
            let key_at = source.at;
            let mut key = Vec::new();
            source.value(&mut key, max_held)?;
            if keys_seen.contains(&key) {
                return Err(not_cut(source.at));
            }
            source.skip_whitespace()?;
            if !source.eat(b":")? {
                return Err(not_cut(source.at));
            }
            source.skip_whitespace()?;
            if head.len() > 1 {
                head.push(b',');
            }
            match key.as_slice() {
                b"\"@graph\"" => {
                    if !source.eat(b"[")? {
                        return Err(not_cut(source.at));
                    }
                    head.extend_from_slice(b"\"@graph\":[");
                    return Ok(Shape::Graph { head, map });
                }
                b"\"@context\"" | b"\"@id\"" => {
                    head.extend_from_slice(&key);
                    head.extend_from_slice(b":\n");
                    let line = head.iter().filter(|&&b| b == b'\n').count() as u64;
                    map.pieces.push((line, source.at));
                    map.head += 1;
                    source.value(&mut head, max_held)?;
                    head.push(b'\n');
                    keys_seen.push(key);
                }
                _ => return Err(not_cut(key_at)),
            }
            source.skip_whitespace()?;
            if !source.eat(b",")? {
                return Err(not_cut(source.at));
            }
        }
    }

    /// The next document to parse, or `None` at the end.
    pub fn next_part(&mut self) -> Result<Option<Part>, JsonLdInputError> {
        if matches!(self.shape, Shape::Unknown) {
            self.shape = self.find_shape()?;
        }
        let (mut text, mut map, close): (Vec<u8>, PartMap, &[u8]) = match &mut self.shape {
            Shape::Unknown | Shape::Done => return Ok(None),
            Shape::Whole(all, start) => {
                let text = std::mem::take(all);
                let start = *start;
                self.shape = Shape::Done;
                return Ok(Some(Part {
                    text,
                    map: PartMap {
                        pieces: vec![(0, start)],
                        head: 0,
                        whole: true,
                    },
                }));
            }
            Shape::Array => (b"[".to_vec(), PartMap::default(), b"]"),
            Shape::Graph { head, map } => (head.clone(), map.clone(), b"]}"),
        };
        // What was held to find the shape is read again: free it once read.
        let held = &mut self.source.inner.get_mut().held;
        if !held.get_ref().is_empty() && held.position() >= held.get_ref().len() as u64 {
            *held = Cursor::new(Vec::new());
        }
        let mut lines = text.iter().filter(|&&b| b == b'\n').count() as u64;
        let start = text.len();
        loop {
            self.source.skip_whitespace()?;
            match self.source.peek()? {
                Some(b']') => {
                    self.source.take(1, None);
                    self.end_of_array()?;
                    break;
                }
                None => {
                    return Err(self
                        .source
                        .refused("the JSON ends inside the top-level array"));
                }
                Some(_) => {}
            }
            text.extend_from_slice(if text.len() > start { b",\n" } else { b"\n" });
            lines += 1;
            let at = self.source.at;
            let from = text.len();
            self.source.value(&mut text, self.max_held)?;
            map.pieces.push((lines, at));
            lines += text[from..].iter().filter(|&&b| b == b'\n').count() as u64;
            self.source.skip_whitespace()?;
            match self.source.peek()? {
                Some(b',') => self.source.take(1, None),
                Some(b']') => {}
                _ => {
                    return Err(self
                        .source
                        .refused("expected `,` or `]` after an element of the top-level array"));
                }
            }
            if text.len() - start >= self.batch || self.source.drained() {
                break;
            }
        }
        if text.len() == start {
            return Ok(None);
        }
        text.extend_from_slice(close);
        Ok(Some(Part { text, map }))
    }

    /// After the top-level array: the end of the input (for an object, after its `}`).
    fn end_of_array(&mut self) -> Result<(), JsonLdInputError> {
        let graph = matches!(self.shape, Shape::Graph { .. });
        self.shape = Shape::Done;
        self.source.skip_whitespace()?;
        if graph {
            if !self.source.eat(b"}")? {
                return Err(self.source.refused(format!(
                    "a key after \"@graph\" in a JSON-LD document of over {}: such a \
                     document is read in parts, which needs \"@graph\" last",
                    size(self.max_held)
                )));
            }
            self.source.skip_whitespace()?;
        }
        if self.source.peek()?.is_some() {
            return Err(self
                .source
                .refused("more JSON after the end of the JSON-LD document"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use oxrdfio::{JsonLdProfileSet, RdfFormat, RdfParser};

    /// The statements of `doc` parsed whole, and parsed in the parts of
    /// `JsonLdParts` (holding at most `max_held`, parts of about `batch` bytes), and the
    /// number of parts.
    fn whole_and_parts(
        doc: &str,
        max_held: usize,
        batch: usize,
    ) -> (Vec<crate::Statement>, Vec<crate::Statement>, usize) {
        fn parse(text: &[u8]) -> Vec<crate::Statement> {
            RdfParser::from_format(RdfFormat::JsonLd {
                profile: JsonLdProfileSet::empty(),
            })
            .with_base_iri("http://base/")
            .unwrap()
            .for_slice(text)
            .map(|q| {
                let q = q.unwrap();
                let mut holder = None;
                crate::oxrdf_adapter::from_ox_quad(q.as_ref(), &mut holder).to_owned()
            })
            .collect()
        }
        let whole = parse(doc.as_bytes());
        let mut parts = JsonLdParts::with_limits(doc.as_bytes(), max_held, batch);
        let (mut cut, mut n) = (Vec::new(), 0);
        while let Some(part) = parts.next_part().unwrap() {
            n += 1;
            cut.extend(parse(&part.text));
        }
        (whole, cut, n)
    }

    const NODES: &str = r#"{"@id": "ex:a", "@type": "ex:T", "ex:p": "x \" ] } [ {", "ex:q": {"@id": "_:b1"}},
        {"ex:p": [1, 2.5e3, true, null, {"@value": "v", "@language": "en"}], "@id": "ex:b"},
        {"@id": "_:b1", "ex:r": {"@list": [{"ex:s": "nested"}, "y"]}},
        {"ex:p": "no id"}"#;

    #[test]
    fn cutting_changes_no_statement() {
        let context = r#"{"ex": "http://ex/", "@vocab": "http://vocab/"}"#;
        let docs = [
            format!(r#"{{"@context": {context}, "@graph": [{NODES}]}}"#),
            format!(r#" {{ "@id" : "ex:g" , "@context":{context},"@graph" :[ {NODES} ] }} "#),
            format!(r#"{{"@graph": [{NODES}]}}"#),
            format!(
                r#"[{}]"#,
                NODES.replace("\"@id\"", "\"@context\": {\"ex\": \"http://ex/\"}, \"@id\"")
            ),
        ];
        for doc in &docs {
            for batch in [1, 100, 1 << 20] {
                let (whole, cut, parts) = whole_and_parts(doc, 150, batch);
                assert!(whole.len() >= 10, "{doc}");
                assert!(
                    crate::iso::isomorphic(&whole, &cut).is_iso(),
                    "{doc}\n{whole:?}\n{cut:?}"
                );
                if batch == 1 {
                    assert_eq!(parts, 4, "{doc}");
                }
            }
            // Under the limit, an object is parsed whole.
            let (_, _, parts) = whole_and_parts(doc, 1 << 20, 1);
            assert_eq!(parts, if doc.starts_with('[') { 4 } else { 1 }, "{doc}");
        }
    }

    fn refusal(doc: &str, max_held: usize) -> String {
        let mut parts = JsonLdParts::with_limits(doc.as_bytes(), max_held, 1);
        loop {
            match parts.next_part() {
                Ok(Some(_)) => {}
                Ok(None) => panic!("no refusal: {doc}"),
                Err(e) => return e.to_string(),
            }
        }
    }

    #[test]
    fn what_cannot_be_cut_is_refused_with_its_place() {
        let nodes = r#"{"@id": "http://ex/a"}, {"@id": "http://ex/b"}"#;
        // Another key than @context and @id before @graph, or one after it.
        let e = refusal(
            &format!(r#"{{"http://ex/p": "v", "@graph": [{nodes}]}}"#),
            40,
        );
        assert!(
            e.contains("byte offset 1:") && e.contains("read in parts only if"),
            "{e}"
        );
        let after = format!("{{\"@graph\": [{nodes}],\n \"@id\": \"http://ex/g\"}}");
        let e = refusal(&after, 40);
        let comma = after.find("],").unwrap() + 1;
        assert!(e.contains(&format!("line 1, byte offset {comma}:")), "{e}");
        assert!(e.contains("a key after \"@graph\""), "{e}");
        // @graph that is no array.
        let e = refusal(&format!(r#"{{"@graph": {nodes}}}"#), 40);
        assert!(e.contains("read in parts only if"), "{e}");
        // One node over the limit.
        let big = format!(r#"[{nodes}, {{"@id": "http://ex/{}"}}]"#, "x".repeat(100));
        let e = refusal(&big, 64);
        assert!(
            e.contains(&format!(
                "byte offset {}:",
                big.find("{\"@id\": \"http://ex/x").unwrap()
            )),
            "{e}"
        );
        assert!(e.contains("which the parser would hold whole"), "{e}");
        // Text after the document.
        let e = refusal(&format!("[{nodes}] [1]"), 40);
        assert!(e.contains("more JSON after"), "{e}");
        let e = refusal(&format!("[{nodes} {nodes}]"), 40);
        assert!(e.contains("expected `,` or `]`"), "{e}");
    }

    #[test]
    fn places_in_parts_are_places_in_the_input() {
        let doc = "{\"@context\": {\"ex\": \"http://ex/\"},\n \"@graph\": [\n  {\"@id\": \"ex:a\"},\n  \
                   {\"@id\": \"ex:b\",\n   \"ex:p\": \"v\"}\n]}";
        let mut parts = JsonLdParts::with_limits(doc.as_bytes(), 40, 1);
        let mut nodes = Vec::new();
        while let Some(part) = parts.next_part().unwrap() {
            let text = String::from_utf8(part.text).unwrap();
            for (line, at) in &part.map.pieces {
                // The piece starts its line of the part, and is there in the input.
                let in_part = text.lines().nth(*line as usize).unwrap();
                assert!(
                    doc[at.offset as usize..].starts_with(&in_part[..4]),
                    "{in_part}"
                );
                let line_start = doc[..at.offset as usize].rfind('\n').map_or(0, |i| i + 1);
                assert_eq!(at.column as usize, at.offset as usize - line_start + 1);
                assert_eq!(part.map.place_of(*line, 0), Some((at.line, at.column)));
                assert_eq!(part.map.place_of(*line + 1, 2), Some((at.line + 1, 3)));
            }
            nodes.push(part.map.nodes().unwrap());
        }
        let lines: Vec<(u64, u64)> = nodes.iter().map(|(a, _)| (a.line, a.column)).collect();
        assert_eq!(lines, [(3, 3), (4, 3)]);
    }
}
