//! Bounds on RDF/XML input, checked ahead of the parser: entity expansion and element
//! depth.
//!
//! Why entities: the RDF/XML parser expands the entities an input declares in its
//! `DOCTYPE` (`<!ENTITY a "&b;&b;&b;…">`), each declaration in full as it is read, and
//! every reference in the document again. Nine nested declarations of ten references
//! each (under a kilobyte, "billion laughs") made it allocate 12 GB. [`EntityGuard`]
//! works out the length each entity expands to without expanding it, and refuses:
//! - an entity that expands to more than [`MAX_ENTITY_BYTES`];
//! - a document whose references expand to more than [`EXPANSION_ALLOWANCE`] plus
//!   [`EXPANSION_PER_BYTE`] times its own size, which ordinary uses (`&rdf;`, `&xsd;`
//!   in attribute values) stay far below.
//!
//! It reads declarations as the parser does (`<!ENTITY name "value">`, parameter
//! entities too, any name without whitespace), wherever they stand, keeping the
//! largest expansion when a name is declared again, and counts every `&name;` of a
//! declared entity, in comments and CDATA sections too: each of these can only make it
//! stricter than the parser.
//!
//! Why depth: the parser's work per element grows with its depth, so deeply nested
//! elements cost time quadratic in the input (64,000 nested `parseType="Resource"`
//! elements, 1.9 MB, took 32 s of CPU). [`ElementDepth`] refuses elements nested deeper
//! than [`MAX_ELEMENT_DEPTH`].
//!
//! [`XmlGuard`] does both; [`crate::input_check::CheckedReader`] runs it over a reader.

use std::collections::HashMap;

/// Longest expansion of one entity.
pub const MAX_ENTITY_BYTES: u64 = 1 << 20;
/// Expansion every document may have, whatever its size.
pub const EXPANSION_ALLOWANCE: u64 = 16 << 20;
/// Expansion allowed per byte of the document on top of the allowance.
pub const EXPANSION_PER_BYTE: u64 = 8;

/// Input beyond the bounds.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct XmlRefused(
    /// What went past which bound.
    pub String,
);

/// Deepest element nesting accepted.
pub const MAX_ELEMENT_DEPTH: usize = 256;

/// Reads RDF/XML piece by piece and refuses it once its entities expand too far.
///
/// ```
/// use jelly::xml_guard::EntityGuard;
/// let ok = "<?xml version=\"1.0\"?><!DOCTYPE rdf:RDF [<!ENTITY ex \"http://ex.org/\">]>\n\
///           <rdf:RDF xmlns:rdf=\"http://www.w3.org/1999/02/22-rdf-syntax-ns#\">\
///           <rdf:Description rdf:about=\"&ex;a\"/></rdf:RDF>";
/// EntityGuard::default().feed(ok.as_bytes()).unwrap();
/// let mut lol = String::from("<!DOCTYPE r [<!ENTITY l0 \"lol\">");
/// for i in 1..10 {
///     lol += &format!("<!ENTITY l{i} \"{}\">", format!("&l{};", i - 1).repeat(10));
/// }
/// lol += "]><r>&l9;</r>";
/// let e = EntityGuard::default().feed(lol.as_bytes()).unwrap_err();
/// assert!(e.to_string().contains("entity `l6` expands to 3000000 bytes"), "{e}");
/// ```
#[derive(Debug, Default)]
pub struct EntityGuard {
    /// Declared entities and the length each expands to.
    entities: HashMap<String, u64>,
    /// The end of the last piece when it cut a declaration or a reference short.
    carry: Vec<u8>,
    /// Bytes read so far.
    read: u64,
    /// Bytes the references read so far expand to.
    expanded: u64,
}

/// The keyword of a declaration.
const DECLARATION: &[u8] = b"<!ENTITY";

impl EntityGuard {
    /// Reads the next piece of the input.
    ///
    /// Declarations are read wherever they stand (the parser reads them in the
    /// `DOCTYPE` only), so no quoting or comment can hide one from the guard; one read
    /// again keeps the larger expansion, so none can lower it either.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<(), XmlRefused> {
        self.read += bytes.len() as u64;
        let joined;
        let mut rest = if self.carry.is_empty() {
            bytes
        } else {
            let mut j = std::mem::take(&mut self.carry);
            j.extend_from_slice(bytes);
            joined = j;
            &joined[..]
        };
        while let Some(at) = rest.iter().position(|&b| b == b'&' || b == b'<') {
            rest = &rest[at..];
            let step = if rest[0] == b'&' {
                match reference(rest) {
                    Some((name, used)) => {
                        if let Some(&len) = std::str::from_utf8(name)
                            .ok()
                            .and_then(|n| self.entities.get(n))
                        {
                            self.expanded = self.expanded.saturating_add(len);
                        }
                        Some(used)
                    }
                    // No end to the name in this piece: kept for the next one.
                    None if !rest[1..].iter().any(|&c| {
                        c == b';' || c == b'&' || c == b'<' || c.is_ascii_whitespace()
                    }) =>
                    {
                        if rest.len() > MAX_DECLARATION_BYTES {
                            return Err(XmlRefused(format!(
                                "an XML reference name of over {MAX_DECLARATION_BYTES} bytes"
                            )));
                        }
                        None
                    }
                    None => Some(1),
                }
            } else if rest.starts_with(DECLARATION) {
                match declaration(rest) {
                    Some((name, value, used)) => {
                        self.declare(name, value)?;
                        Some(used)
                    }
                    None if rest.len() > MAX_DECLARATION_BYTES => {
                        return Err(XmlRefused(format!(
                            "an XML entity declaration of over {MAX_DECLARATION_BYTES} bytes"
                        )));
                    }
                    None => None,
                }
            } else if rest.len() < DECLARATION.len() && DECLARATION.starts_with(rest) {
                None
            } else {
                Some(1)
            };
            match step {
                Some(n) => rest = &rest[n..],
                // Cut short at the end of the piece: kept for the next one.
                None => {
                    self.carry = rest.to_vec();
                    break;
                }
            }
        }
        let limit =
            EXPANSION_ALLOWANCE.saturating_add(self.read.saturating_mul(EXPANSION_PER_BYTE));
        if self.expanded > limit {
            return Err(XmlRefused(format!(
                "the XML entity references of the first {} bytes expand to {} bytes; at most \
                 {EXPANSION_PER_BYTE} per byte plus {EXPANSION_ALLOWANCE} are accepted (an \
                 entity expansion bomb?)",
                self.read, self.expanded
            )));
        }
        Ok(())
    }

    /// Declares `name`, refusing it if it expands too far.
    fn declare(&mut self, name: &str, value: &[u8]) -> Result<(), XmlRefused> {
        let len = self.expansion(value);
        if len > MAX_ENTITY_BYTES {
            return Err(XmlRefused(format!(
                "XML entity `{name}` expands to {len} bytes; at most {MAX_ENTITY_BYTES} are \
                 accepted (an entity expansion bomb?)"
            )));
        }
        // The parser reads declarations in the DOCTYPE only, the guard everywhere: a
        // later one (in a comment, say) must not lower what an entity expands to.
        let kept = self.entities.entry(name.to_string()).or_insert(0);
        *kept = (*kept).max(len);
        Ok(())
    }

    /// The length `value` expands to with the entities declared so far (predefined
    /// and character references: at most 4 bytes; an undeclared name, which the parser
    /// refuses, the same).
    fn expansion(&self, value: &[u8]) -> u64 {
        let mut len = 0u64;
        let mut rest = value;
        while let Some(amp) = rest.iter().position(|&b| b == b'&') {
            len = len.saturating_add(amp as u64);
            rest = &rest[amp..];
            match reference(rest) {
                Some((name, used)) => {
                    let one = std::str::from_utf8(name)
                        .ok()
                        .and_then(|n| self.entities.get(n))
                        .copied()
                        .unwrap_or(4);
                    len = len.saturating_add(one);
                    rest = &rest[used..];
                }
                None => {
                    len = len.saturating_add(1);
                    rest = &rest[1..];
                }
            }
        }
        len.saturating_add(rest.len() as u64)
    }
}

/// Longest entity declaration read.
const MAX_DECLARATION_BYTES: usize = 4 << 20;

/// A declaration `<!ENTITY [%] name "value">` at the start of `b` (read as the parser
/// reads it): its name, value and the bytes up to its closing quote; `None` while it
/// is incomplete. A malformed one, which the parser refuses, counts as empty.
fn declaration(b: &[u8]) -> Option<(&str, &[u8], usize)> {
    let after = &b[DECLARATION.len()..];
    let open = after.iter().position(|&c| c == b'"')?;
    let close = after[open + 1..].iter().position(|&c| c == b'"')?;
    let head = std::str::from_utf8(&after[..open]).unwrap_or("");
    let head = head.trim_start();
    let head = head.strip_prefix('%').unwrap_or(head).trim_start();
    let name = head.split_ascii_whitespace().next().unwrap_or("");
    let value = &after[open + 1..open + 1 + close];
    Some((name, value, DECLARATION.len() + open + close + 2))
}

/// A reference `&name;` at the start of `b`: the name and the bytes it takes. A name
/// is whatever stands before the `;` (the parser resolves any declared name), up to
/// whitespace, `&` or `<`, which end a run that is no reference.
fn reference(b: &[u8]) -> Option<(&[u8], usize)> {
    let body = b.get(1..)?;
    let end = body
        .iter()
        .position(|&c| c == b';' || c == b'&' || c == b'<' || c.is_ascii_whitespace())?;
    (body[end] == b';' && end > 0).then_some((&body[..end], end + 2))
}

/// Both bounds: [`EntityGuard`] and [`ElementDepth`].
///
/// ```
/// use jelly::xml_guard::XmlGuard;
/// let deep = format!("<r>{}{}</r>", "<a>".repeat(300), "</a>".repeat(300));
/// let e = XmlGuard::default().feed(deep.as_bytes()).unwrap_err();
/// assert!(e.to_string().contains("nested deeper than 256"), "{e}");
/// ```
#[derive(Debug, Default)]
pub struct XmlGuard {
    entities: EntityGuard,
    depth: ElementDepth,
}

impl XmlGuard {
    /// Reads the next piece of the input.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<(), XmlRefused> {
        self.depth.feed(bytes)?;
        self.entities.feed(bytes)
    }
}

/// Where [`ElementDepth`] is in the markup.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum Markup {
    #[default]
    Text,
    /// After `<`.
    Lt,
    /// After `<!`.
    Bang,
    /// After `<!-`.
    BangDash,
    /// In a comment, after this many `-`.
    Comment(u8),
    /// In a CDATA section, after this many `]`.
    CData(u8),
    /// In a processing instruction, just after a `?` or not.
    Pi(bool),
    /// In a declaration (`<!DOCTYPE`), inside this many more `<` than `>`.
    Declaration(u32),
    /// In an end tag.
    EndTag,
    /// In a start tag: inside this attribute quote, just after a `/` or not.
    StartTag(Option<u8>, bool),
}

/// Follows the nesting of elements through the markup, piece by piece.
///
/// ```
/// use jelly::xml_guard::ElementDepth;
/// let mut d = ElementDepth::default();
/// d.feed(b"<?xml version=\"1.0\"?><!-- <a><a> --><r a=\"/>\"><![CDATA[<a><a>]]><e/></r>").unwrap();
/// assert_eq!(d.depth(), 0);
/// ```
#[derive(Debug, Default)]
pub struct ElementDepth {
    state: Markup,
    depth: usize,
    /// Bytes read.
    read: u64,
}

impl ElementDepth {
    /// Elements open now.
    pub fn depth(&self) -> usize {
        self.depth
    }

    /// Reads the next piece of the input.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<(), XmlRefused> {
        use Markup::*;
        for &b in bytes {
            self.state = match self.state {
                Text if b == b'<' => Lt,
                Text => Text,
                Lt => match b {
                    b'/' => EndTag,
                    b'!' => Bang,
                    b'?' => Pi(false),
                    _ => StartTag(None, false),
                },
                Bang => match b {
                    b'-' => BangDash,
                    b'[' => CData(0),
                    _ => Declaration(0),
                },
                BangDash if b == b'-' => Comment(0),
                BangDash => Declaration(0),
                Comment(n) if b == b'-' => Comment((n + 1).min(2)),
                Comment(2) if b == b'>' => Text,
                Comment(_) => Comment(0),
                CData(n) if b == b']' => CData((n + 1).min(2)),
                CData(2) if b == b'>' => Text,
                CData(_) => CData(0),
                Pi(true) if b == b'>' => Text,
                Pi(_) => Pi(b == b'?'),
                // As quick-xml: a declaration ends at the `>` that balances its `<`s
                // (quotes and brackets do not count).
                Declaration(0) if b == b'>' => Text,
                Declaration(n) if b == b'>' => Declaration(n - 1),
                Declaration(n) if b == b'<' => Declaration(n + 1),
                Declaration(n) => Declaration(n),
                EndTag if b == b'>' => {
                    self.depth = self.depth.saturating_sub(1);
                    Text
                }
                EndTag => EndTag,
                StartTag(Some(q), _) => StartTag((b != q).then_some(q), false),
                StartTag(None, slash) => match b {
                    b'"' | b'\'' => StartTag(Some(b), false),
                    b'/' => StartTag(None, true),
                    b'>' => {
                        if !slash {
                            self.depth += 1;
                            if self.depth > MAX_ELEMENT_DEPTH {
                                return Err(XmlRefused(format!(
                                    "XML elements nested deeper than {MAX_ELEMENT_DEPTH} levels \
                                     (byte offset {})",
                                    self.read
                                )));
                            }
                        }
                        Text
                    }
                    _ => StartTag(None, false),
                },
            };
            self.read += 1;
        }
        Ok(())
    }
}

/// Run over a stream by [`crate::input_check::CheckedReader`]: a bomb ends in an
/// [`std::io::ErrorKind::InvalidData`] error before the parser reading from it gets to
/// expand it.
///
/// ```
/// use std::io::Read;
/// let lol = "<!DOCTYPE r [<!ENTITY a \"aaaaaaaaaa\"><!ENTITY b \"&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;\">\
///            <!ENTITY c \"&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;\">]><r>".to_string()
///     + &"&c;".repeat(20_000) + "</r>";
/// let mut out = Vec::new();
/// let e = jelly::input_check::CheckedReader::new(lol.as_bytes(), jelly::xml_guard::XmlGuard::default())
///     .read_to_end(&mut out)
///     .unwrap_err();
/// assert_eq!(e.kind(), std::io::ErrorKind::InvalidData);
/// ```
impl crate::input_check::InputCheck for XmlGuard {
    type Error = XmlRefused;

    fn feed(&mut self, bytes: &[u8]) -> Result<(), XmlRefused> {
        XmlGuard::feed(self, bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(decls: &str, body: &str) -> String {
        format!("<?xml version=\"1.0\"?>\n<!-- c -->\n<!DOCTYPE rdf:RDF [{decls}]>\n<r>{body}</r>")
    }

    /// Review findings: names the parser resolves but an older guard did not count,
    /// and a declaration outside the DOCTYPE (which the parser ignores) lowering a
    /// count.
    #[test]
    fn odd_names_and_redeclarations_hide_nothing() {
        let mut decls = String::from("<!ENTITY l0! \"lollollollo\">");
        for i in 1..10 {
            decls += &format!(
                "<!ENTITY l{i}! \"{}\">",
                format!("&l{}!;", i - 1).repeat(10)
            );
        }
        let e = EntityGuard::default()
            .feed(doc(&decls, "&l9!;").as_bytes())
            .unwrap_err();
        assert!(e.to_string().contains("`l5!`"), "{e}");
        let long = "n".repeat(1000);
        let d = doc(
            &format!("<!ENTITY {long} \"{}\">", "x".repeat(100_000)),
            &format!("&{long};").repeat(400),
        );
        assert!(EntityGuard::default().feed(d.as_bytes()).is_err());
        let mut decls = String::from("<!ENTITY a \"aaaaaaaaaa\">");
        for (n, prev) in [("b", "a"), ("c", "b"), ("d", "c"), ("e", "d"), ("f", "e")] {
            decls += &format!("<!ENTITY {n} \"{}\">", format!("&{prev};").repeat(10));
        }
        let body = format!("<!-- <!ENTITY f \"\"> -->{}", "&f;".repeat(100));
        let e = EntityGuard::default()
            .feed(doc(&decls, &body).as_bytes())
            .unwrap_err();
        assert!(e.to_string().contains("expand to"), "{e}");
    }

    #[test]
    fn element_depth_is_bounded_in_any_pieces() {
        let nest = |n: usize| format!("<r>{}{}</r>", "<a b=\"1\">".repeat(n), "</a>".repeat(n));
        for piece in [1, 5, 1 << 20] {
            let ok = nest(MAX_ELEMENT_DEPTH - 1).repeat(3);
            let mut d = ElementDepth::default();
            ok.as_bytes()
                .chunks(piece)
                .try_for_each(|c| d.feed(c))
                .unwrap();
            assert_eq!(d.depth(), 0);
            let deep = nest(MAX_ELEMENT_DEPTH);
            let mut d = ElementDepth::default();
            let e = deep.as_bytes().chunks(piece).try_for_each(|c| d.feed(c));
            assert!(e.unwrap_err().to_string().contains("deeper than"));
        }
        // Self-closing elements, quoted `/>` and `>`, comments, CDATA and declarations
        // (with brackets in entity values) open nothing.
        let flat = "<?xml version=\"1.0\"?><!DOCTYPE r [<!ENTITY x \"[[\">]><!-- <a> -->\
                    <r><e/><f g='/>' h=\">\"/><![CDATA[<a><a>]]></r>";
        let mut d = ElementDepth::default();
        d.feed(flat.as_bytes()).unwrap();
        assert_eq!(d.depth(), 0);
        // A declaration ends where the parser ends it, at the `>` that balances its
        // `<`s: an unclosed `[` or quote in it hides nothing after it.
        let e = ElementDepth::default()
            .feed(format!("<!DOCTYPE r [><r>{}", "<a>".repeat(300)).as_bytes())
            .unwrap_err();
        assert!(e.to_string().contains("deeper than"), "{e}");
        let e = ElementDepth::default()
            .feed(format!("<!DOCTYPE r [<!ENTITY x \"'\">]><r>{}", "<a>".repeat(300)).as_bytes())
            .unwrap_err();
        assert!(e.to_string().contains("deeper than"), "{e}");
    }

    #[test]
    fn ordinary_entities_pass_in_any_pieces() {
        let d = doc(
            "<!ENTITY rdf \"http://www.w3.org/1999/02/22-rdf-syntax-ns#\"><!ENTITY xsd 'x'>",
            &"<a b=\"&rdf;type\">&amp;&#233;</a>".repeat(2_000),
        );
        for piece in [1, 7, 4096, d.len()] {
            let mut g = EntityGuard::default();
            for c in d.as_bytes().chunks(piece) {
                g.feed(c).unwrap();
            }
            assert_eq!(g.entities["rdf"], 43);
            assert!(g.carry.len() < 300);
        }
    }

    #[test]
    fn a_bomb_is_refused_in_any_pieces() {
        // One entity of 20 KB referenced 2000 times in a 10 KB body: 40 MB.
        let big = "x".repeat(20_000);
        let d = doc(&format!("<!ENTITY big \"{big}\">"), &"&big;".repeat(2000));
        for piece in [3, 4096, d.len()] {
            let mut g = EntityGuard::default();
            let r = d.as_bytes().chunks(piece).try_for_each(|c| g.feed(c));
            let e = r.unwrap_err().to_string();
            assert!(e.contains("expand to"), "{e}");
        }
        // Declarations that grow tenfold at each level: refused at the declaration.
        let mut decls = String::from("<!ENTITY l0 \"lollollol\">");
        for i in 1..9 {
            decls += &format!("<!ENTITY l{i} \"{}\">", format!("&l{};", i - 1).repeat(10));
        }
        let e = EntityGuard::default()
            .feed(doc(&decls, "&l8;").as_bytes())
            .unwrap_err();
        assert!(e.to_string().contains("`l6`"), "{e}");
    }

    #[test]
    fn no_declarations_no_limit_and_nothing_hides_one() {
        let d = format!("<r>{}</r>", "&amp;".repeat(100_000));
        EntityGuard::default().feed(d.as_bytes()).unwrap();
        // A `]>` inside a value, or a comment, ends nothing for the guard.
        let big = "x".repeat(900_000);
        let d = doc(
            &format!("<!ENTITY a \"]>\"><!-- \" --><!ENTITY b \"{big}\"><!ENTITY c \"&b;&b;\">"),
            "&c;",
        );
        let e = EntityGuard::default().feed(d.as_bytes()).unwrap_err();
        assert!(e.to_string().contains("`c`"), "{e}");
        let e = EntityGuard::default()
            .feed(format!("<!ENTITY x \"{}", "y".repeat(5 << 20)).as_bytes())
            .unwrap_err();
        assert!(e.to_string().contains("declaration of over"), "{e}");
    }
}
