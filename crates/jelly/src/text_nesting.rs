//! How deeply constructs nest in N-Triples, N-Quads, Turtle, TriG or N3 text, found
//! without parsing it: RDF 1.2 triple terms (`<<( … )>>`) and reified triples
//! (`<< … >>`), and brackets: blank node property lists `[ … ]`, collections `( … )`,
//! N3 formulas and annotation blocks `{ … }`, `{| … |}`.
//!
//! Why: the text parsers and what is built from their terms recurse once per level of
//! triple terms, so a body of a few hundred kilobytes of `<<(` overflowed a thread's
//! stack and aborted the process; and the Turtle-family parser keeps a state per open
//! bracket, so a million nested `[` made it hold 557 MB. [`NestingScanner`] reads the
//! text ahead of the parser (in pieces, as it streams) and stops it at a depth of
//! triple terms that Jelly decoders refuse anyway ([`crate::DecoderOptions::max_nesting`],
//! 100 by default), and at [`MAX_BRACKET_NESTING`] levels of brackets.
//!
//! It follows just enough of the syntax to find these outside IRIs, strings (short and
//! long, with escapes) and comments. A `\` outside them escapes the next byte, as in
//! Turtle's local names (`ex:a\#b` is no comment, `ex:a\(` opens nothing). An IRI ends
//! at its `>`, or at the first byte no IRI may hold (a space, `{`, `"`, …): so N3's `<=`
//! hides nothing, and text that is no IRI is scanned as text.
//!
//! The same reading also tells where the IRI of each `@prefix`, `@base`, `PREFIX` or
//! `BASE` directive ends, on request ([`NestingScanner::noting_directives`]): a reader
//! can then end a read there, and know, when the parser asks for more, that the
//! parser has taken the directive in (see the command line's namespace declarations).

use std::collections::VecDeque;

/// The default depth limit of triple terms and reified triples, the decoders' own.
pub const MAX_TEXT_NESTING: usize = 100;

/// The default depth limit of brackets (`[ ]`, `( )`, `{ }`): far beyond what data
/// nests (OWL class expressions, SHACL shapes and N3 rules stay under a few dozen), and
/// under a megabyte of parser state.
pub const MAX_BRACKET_NESTING: usize = 1024;

/// What nested too deeply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nesting {
    /// `<<( … )>>` and `<< … >>`.
    TripleTerms,
    /// `[ ]`, `( )` and `{ }`.
    Brackets,
}

impl std::fmt::Display for Nesting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Nesting::TripleTerms => "triple terms or reified triples",
            Nesting::Brackets => {
                "blank node property lists, collections or formulas (`[ ]`, `( )`, `{ }`)"
            }
        })
    }
}

/// Text nested deeper than the limit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} nested deeper than {max} levels (line {line}, byte offset {offset})")]
pub struct TooDeep {
    /// What nested.
    pub what: Nesting,
    /// The limit.
    pub max: usize,
    /// 1-based line of the opening (`<<`, `[`, …) that went past the limit.
    pub line: u64,
    /// Its byte offset in the text.
    pub offset: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Normal,
    /// After a `\` outside strings and IRIs.
    Escaped,
    Comment,
    /// After one `<` (a second one opens a level; anything else starts an IRI).
    Lt,
    Iri,
    /// After one `>` (a second one closes a level).
    Gt,
    /// `count` quote characters `q` seen where a string may start.
    Quotes {
        q: u8,
        count: u8,
    },
    Str {
        q: u8,
        long: bool,
        escaped: bool,
    },
    /// Inside a long string, `count` closing quotes seen.
    LongClose {
        q: u8,
        count: u8,
    },
}

/// Reads text piece by piece and refuses it once triple terms nest deeper than `max`,
/// or brackets deeper than [`MAX_BRACKET_NESTING`].
///
/// ```
/// use jelly::text_nesting::{NestingScanner, Nesting};
/// let mut s = NestingScanner::new(2);
/// s.feed(b"<s> <p> <<( <a> <b> \"<<\" )>> .\n").unwrap();
/// let deep = b"<s> <p> <<( <a> <b> <<( <c> <d> <<( <e> <f> <g> )>> )>> )>> .";
/// let e = NestingScanner::new(2).feed(deep).unwrap_err();
/// assert_eq!((e.what, e.line, e.offset), (Nesting::TripleTerms, 1, 33));
/// let lists = b"<s> <p> ( ( [ <q> \"]]\" ] ) ) .";
/// NestingScanner::new(2).with_max_brackets(3).feed(lists).unwrap();
/// let e = NestingScanner::new(2).with_max_brackets(2).feed(lists).unwrap_err();
/// assert_eq!((e.what, e.offset), (Nesting::Brackets, 12));
/// ```
#[derive(Debug, Clone)]
pub struct NestingScanner {
    max: usize,
    max_brackets: usize,
    depth: usize,
    brackets: usize,
    state: State,
    line: u64,
    offset: u64,
    directives: Option<Box<DirectiveNotes>>,
}

/// Where directives end, for [`NestingScanner::noting_directives`].
#[derive(Debug, Clone, Default)]
struct DirectiveNotes {
    /// The ASCII letters of the word being read (lowercased; 7 means longer than 6).
    word: [u8; 6],
    word_len: u8,
    /// The word started where a keyword may: after `@`, or not inside a name.
    word_may_be_keyword: bool,
    /// The word started with `@`.
    at: bool,
    /// A directive keyword was read and its IRI has not ended yet.
    pending: bool,
    /// Offsets just past the IRIs of directives, not yet taken.
    ends: VecDeque<u64>,
}

impl DirectiveNotes {
    /// Follows words through a byte read outside strings, IRIs and comments.
    fn byte(&mut self, b: u8) {
        if b.is_ascii_alphabetic() {
            if self.word_may_be_keyword {
                if let Some(slot) = self.word.get_mut(usize::from(self.word_len)) {
                    *slot = b.to_ascii_lowercase();
                }
                self.word_len = self.word_len.saturating_add(1).min(7);
            }
            return;
        }
        // A word ends. `@prefix` is a directive whatever follows (`@prefix:<…>` declares
        // the empty prefix); a bare `PREFIX` followed by `:` or a name character is a
        // prefixed name or part of one.
        let word = self.word.get(..usize::from(self.word_len)).unwrap_or(&[]);
        if self.word_may_be_keyword
            && matches!(word, b"prefix" | b"base")
            && (self.at || !(b == b':' || is_name_byte(b)))
        {
            self.pending = true;
        }
        self.word_len = 0;
        self.at = b == b'@';
        self.word_may_be_keyword = self.at || !is_name_byte(b);
    }

    /// An IRI ended just before `end`.
    fn iri_end(&mut self, end: u64) {
        if std::mem::take(&mut self.pending) {
            self.ends.push_back(end);
        }
    }
}

/// A byte that ends an IRI: its `>`, or one no IRI may hold.
fn ends_iri(b: u8) -> bool {
    ENDS_IRI[usize::from(b)]
}

/// [`ends_iri`] as a table: the IRI loop runs once per byte of most texts, and a
/// table lookup is cheaper there than the jump table `matches!` compiles to.
static ENDS_IRI: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        t[b] = b <= b' ' as usize
            || matches!(
                b as u8,
                b'>' | b'<' | b'"' | b'{' | b'}' | b'|' | b'^' | b'`'
            );
        b += 1;
    }
    t
};

/// A byte that changes the state when read outside strings, IRIs and comments (see
/// `NestingScanner::normal`).
fn acts_in_normal(b: u8) -> bool {
    matches!(
        b,
        b'#' | b'\\' | b'<' | b'>' | b'"' | b'\'' | b'[' | b'(' | b'{' | b']' | b')' | b'}'
    )
}

/// A byte that continues a prefixed name, blank node label, variable or keyword (any
/// non-ASCII byte may be part of one). `.` is not one: it ends statements more often
/// than it stands inside names, and taking a name for a possible keyword only costs
/// the reader a shorter read.
fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric()
        || matches!(b, b'_' | b'-' | b':' | b'%' | b'\\' | b'?' | b'$' | b'@')
        || b >= 0x80
}

impl NestingScanner {
    /// A scanner that refuses triple terms nested deeper than `max`, and brackets
    /// deeper than [`MAX_BRACKET_NESTING`].
    pub fn new(max: usize) -> NestingScanner {
        NestingScanner {
            max,
            max_brackets: MAX_BRACKET_NESTING,
            depth: 0,
            brackets: 0,
            state: State::Normal,
            line: 1,
            offset: 0,
            directives: None,
        }
    }

    /// The same, refusing brackets nested deeper than `max_brackets`.
    pub fn with_max_brackets(mut self, max_brackets: usize) -> NestingScanner {
        self.max_brackets = max_brackets;
        self
    }

    /// The same, noting where the IRI of each directive (`@prefix`, `@base`, `PREFIX`,
    /// `BASE`) ends: see [`take_directive_end`](Self::take_directive_end). A word that
    /// only looks like a directive (a language tag `"…"@base`, say) may be noted too;
    /// a directive is never missed.
    ///
    /// ```
    /// use jelly::text_nesting::NestingScanner;
    /// let text = b"@prefix ex: <http://ex.org/> .\nex:a ex:prefix ex:base .\nPREFIX # c\n e: <e#>\n";
    /// let mut s = NestingScanner::new(100).noting_directives();
    /// s.feed(text).unwrap();
    /// assert_eq!(s.take_directive_end(), Some(28));
    /// assert_eq!(s.take_directive_end(), Some(text.len() as u64 - 1));
    /// assert_eq!(s.take_directive_end(), None);
    /// ```
    pub fn noting_directives(mut self) -> NestingScanner {
        self.directives = Some(Box::new(DirectiveNotes {
            word_may_be_keyword: true,
            ..DirectiveNotes::default()
        }));
        self
    }

    /// The first noted offset, just past a directive's IRI, not taken yet (in the order
    /// of the text).
    pub fn take_directive_end(&mut self) -> Option<u64> {
        self.directives.as_mut()?.ends.pop_front()
    }

    /// Reads the next piece of the text.
    pub fn feed(&mut self, mut bytes: &[u8]) -> Result<(), TooDeep> {
        while let Some((&b, rest)) = bytes.split_first() {
            // Most of a text is the inside of IRIs and strings, where only a few bytes
            // change anything: runs of the others are passed over whole (this scanner
            // took 29% of an N-Triples conversion when it read them one by one).
            let run = self.quiet_run(bytes);
            if run > 0 {
                let (quiet, after) = bytes.split_at(run);
                self.offset += run as u64;
                if matches!(self.state, State::Str { long: true, .. }) {
                    self.line += memchr::memchr_iter(b'\n', quiet).count() as u64;
                }
                bytes = after;
                continue;
            }
            self.byte(b)?;
            self.offset += 1;
            if b == b'\n' {
                self.line += 1;
            }
            bytes = rest;
        }
        Ok(())
    }

    /// How many bytes from the start of `bytes` would leave the state as it is; only
    /// the offset (and, inside long strings, the line) moves past them.
    fn quiet_run(&self, bytes: &[u8]) -> usize {
        let stop = match self.state {
            State::Iri => bytes.iter().position(|&b| ends_iri(b)),
            State::Str {
                q,
                long: false,
                escaped: false,
            } => memchr::memchr3(q, b'\\', b'\n', bytes),
            State::Str {
                q,
                long: true,
                escaped: false,
            } => memchr::memchr2(q, b'\\', bytes),
            State::Comment => memchr::memchr2(b'\n', b'\r', bytes),
            // Outside strings and IRIs every byte is a possible directive's letter.
            State::Normal if self.directives.is_none() => {
                bytes.iter().position(|&b| b == b'\n' || acts_in_normal(b))
            }
            _ => Some(0),
        };
        stop.unwrap_or(bytes.len())
    }

    fn too_deep(&self, what: Nesting, max: usize) -> TooDeep {
        TooDeep {
            what,
            max,
            line: self.line,
            offset: self.offset,
        }
    }

    fn byte(&mut self, b: u8) -> Result<(), TooDeep> {
        use State::*;
        self.state = match self.state {
            Normal => self.normal(b)?,
            Escaped => Normal,
            // As the parsers: a comment ends at a line feed or a carriage return.
            Comment if b == b'\n' || b == b'\r' => Normal,
            Comment => Comment,
            Lt if b == b'<' => {
                self.depth += 1;
                if self.depth > self.max {
                    return Err(self.too_deep(Nesting::TripleTerms, self.max));
                }
                Normal
            }
            Lt | Iri if b == b'>' => {
                if let Some(d) = &mut self.directives {
                    d.iri_end(self.offset + 1);
                }
                Normal
            }
            // No IRI holds these: this `<` started no IRI (N3's `<=`, or an error the
            // parser reports), and the byte is read as text.
            Lt | Iri if ends_iri(b) => self.normal(b)?,
            Lt | Iri => Iri,
            Gt if b == b'>' => {
                self.depth = self.depth.saturating_sub(1);
                Normal
            }
            Gt => self.normal(b)?,
            Quotes { q, count } if b == q => {
                if count == 2 {
                    Str {
                        q,
                        long: true,
                        escaped: false,
                    }
                } else {
                    Quotes { q, count: 2 }
                }
            }
            // `""`: an empty string, over.
            Quotes { count: 2, .. } => self.normal(b)?,
            Quotes { q, .. } => Self::in_string(q, false, b),
            Str {
                q,
                long,
                escaped: true,
            } => Str {
                q,
                long,
                escaped: false,
            },
            Str { q, long, .. } if b == q => {
                if long {
                    LongClose { q, count: 1 }
                } else {
                    Normal
                }
            }
            // A short string cannot span lines; the parser refuses it.
            Str { long: false, .. } if b == b'\n' => Normal,
            Str { q, long, .. } => Self::in_string(q, long, b),
            LongClose { q, count } if b == q => {
                if count == 2 {
                    Normal
                } else {
                    LongClose {
                        q,
                        count: count + 1,
                    }
                }
            }
            LongClose { q, .. } => Self::in_string(q, true, b),
        };
        Ok(())
    }

    /// The state after byte `b` read outside strings, IRIs and comments.
    fn normal(&mut self, b: u8) -> Result<State, TooDeep> {
        if let Some(d) = &mut self.directives {
            d.byte(b);
        }
        Ok(match b {
            b'#' => State::Comment,
            b'\\' => State::Escaped,
            b'<' => State::Lt,
            b'>' => State::Gt,
            b'"' | b'\'' => State::Quotes { q: b, count: 1 },
            b'[' | b'(' | b'{' => {
                self.brackets += 1;
                if self.brackets > self.max_brackets {
                    return Err(self.too_deep(Nesting::Brackets, self.max_brackets));
                }
                State::Normal
            }
            b']' | b')' | b'}' => {
                self.brackets = self.brackets.saturating_sub(1);
                State::Normal
            }
            _ => State::Normal,
        })
    }

    /// The state after byte `b` inside a string (not its closing quote).
    fn in_string(q: u8, long: bool, b: u8) -> State {
        State::Str {
            q,
            long,
            escaped: b == b'\\',
        }
    }
}

impl crate::input_check::InputCheck for NestingScanner {
    type Error = TooDeep;

    fn feed(&mut self, bytes: &[u8]) -> Result<(), TooDeep> {
        NestingScanner::feed(self, bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn depth_ok(text: &str, max: usize) -> bool {
        NestingScanner::new(max).feed(text.as_bytes()).is_ok()
    }

    fn brackets_ok(text: &str, max: usize) -> bool {
        NestingScanner::new(MAX_TEXT_NESTING)
            .with_max_brackets(max)
            .feed(text.as_bytes())
            .is_ok()
    }

    /// The directive ends noted in `text`, fed in pieces of `piece` bytes.
    fn directive_ends(text: &str, piece: usize) -> Vec<u64> {
        let mut s = NestingScanner::new(MAX_TEXT_NESTING).noting_directives();
        let mut ends = Vec::new();
        for c in text.as_bytes().chunks(piece) {
            s.feed(c).unwrap();
            while let Some(e) = s.take_directive_end() {
                ends.push(e);
            }
        }
        ends
    }

    fn nested(n: usize) -> String {
        format!(
            "<s> <p> {}<o>{} .\n",
            "<<( <s> <p> ".repeat(n),
            " )>>".repeat(n)
        )
    }

    #[test]
    fn counts_levels_and_closes_them() {
        assert!(depth_ok(&nested(3), 3));
        assert!(!depth_ok(&nested(4), 3));
        // Levels closed before count no more.
        let many = nested(3).repeat(50);
        assert!(depth_ok(&many, 3));
        // Reified triples too.
        assert!(!depth_ok(
            "<< << << <a> <b> <c> >> <b> <c> >> <b> <c> >> .",
            2
        ));
    }

    #[test]
    fn strings_iris_comments_and_escapes_hide_nothing_else() {
        let hidden = "<s> <p> \"<<<<<<\" , '<<<<' , \"\"\"<<\n<<\"\"\" , '''<<''' .\n\
                      # <<<<<<<<\n<http://e/a#[(> <p> ex:a\\#b .\n";
        assert!(depth_ok(hidden, 0), "{hidden}");
        assert!(brackets_ok(hidden, 0), "{hidden}");
        // No IRI holds a `<`: one ends what looked like an IRI.
        assert!(!depth_ok("<http://e/a<<> <p> <o> .", 0));
        // A `\"` inside a string does not end it; `""` is an empty string.
        assert!(depth_ok("<s> <p> \"a\\\"<<<<\" , \"\" .", 0));
        assert!(!depth_ok("<s> <p> \"\" , <<( <a> <b> <c> )>> .", 0));
        // A comment ends at a carriage return too (review finding: `#\r` hid a line).
        assert!(!depth_ok("#\r<s> <p> <<( <a> <b> <c> )>> .", 0));
        // A local name's escaped `#` starts no comment: the level after it counts.
        assert!(!depth_ok("ex:a\\#b <p> <<( <a> <b> <c> )>> .", 0));
        // Long strings end at three quotes, even after fewer.
        assert!(!depth_ok(
            "<s> <p> \"\"\"a\"\"b\"\"\" , <<( <a> <b> <c> )>> .",
            0
        ));
    }

    #[test]
    fn pieces_cut_anywhere_give_the_same_answer() {
        let text = format!("# c\n<s> <p> \"\"\"x\"\"\" .\n{}", nested(5));
        let bytes = text.as_bytes();
        for max in [4, 5] {
            let whole = NestingScanner::new(max).feed(bytes);
            for cut in 0..bytes.len() {
                let mut s = NestingScanner::new(max);
                let r = s.feed(&bytes[..cut]).and_then(|()| s.feed(&bytes[cut..]));
                assert_eq!(r, whole, "cut at {cut}");
            }
        }
    }

    #[test]
    fn reports_where() {
        let text = format!("<a> <b> <c> .\n{}", nested(10));
        let e = NestingScanner::new(2).feed(text.as_bytes()).unwrap_err();
        assert_eq!(e.line, 2);
        assert_eq!(&text[e.offset as usize - 1..e.offset as usize + 1], "<<");
        assert!(e.to_string().contains("line 2"), "{e}");
    }

    #[test]
    fn brackets_count_outside_strings_iris_and_comments() {
        // Anonymous blank nodes, lists and formulas open and close a level each.
        let flat = "<s> <p> [] , [ <q> () ] , ( [] [] ) .\n{ <a> <b> <c> } => { <d> <e> <f> } .\n\
                    <s> <p> <o> {| <r> <t> |} .\n"
            .repeat(100);
        assert!(brackets_ok(&flat, 2));
        assert!(!brackets_ok(&flat, 1));
        let deep = |n: usize| format!("<s> <p> {}<o>{} .\n", "[ <p> ".repeat(n), " ]".repeat(n));
        assert!(brackets_ok(&deep(5), 5));
        assert!(!brackets_ok(&deep(6), 5));
        for open in ["(", "{", "[ <p>"] {
            assert!(
                !brackets_ok(&format!("<s> <p> {} .", open.repeat(6)), 5),
                "{open}"
            );
        }
        // Brackets in strings (short, long, either quote, with escapes), IRIs, comments
        // and escaped in local names open nothing.
        let hidden = "<s> <p> \"[[[\" , '(((' , \"\"\"{{{\n[[[\"\"\" , '''(((''' , \"\\\"[[[\" .\n\
                      # [[[[[[\n<http://e/a[(> <p> ex:a\\(\\(\\( .\n";
        assert!(brackets_ok(hidden, 0), "{hidden}");
        // N3's `<=` and `<-` start no IRI: the formula after them counts.
        assert!(!brackets_ok("{ <a> <b> <c> } <= {{ <d> <e> <f> }} .", 1));
        assert!(!brackets_ok("<a> <-{{ <b> }} <c> .", 1));
        let e = NestingScanner::new(MAX_TEXT_NESTING)
            .with_max_brackets(1)
            .feed(b"<a> <b> <c> .\n<s> <p> [ <q> ( ] .")
            .unwrap_err();
        assert_eq!((e.what, e.line, e.offset), (Nesting::Brackets, 2, 28));
        assert!(
            e.to_string()
                .contains("`{ }`) nested deeper than 1 levels (line 2, byte offset 28)"),
            "{e}"
        );
    }

    #[test]
    fn default_bracket_limit() {
        let ok = "[".repeat(MAX_BRACKET_NESTING);
        NestingScanner::new(MAX_TEXT_NESTING)
            .feed(ok.as_bytes())
            .unwrap();
        let e = NestingScanner::new(MAX_TEXT_NESTING)
            .feed("(".repeat(MAX_BRACKET_NESTING + 1).as_bytes())
            .unwrap_err();
        assert_eq!(
            (e.what, e.offset),
            (Nesting::Brackets, MAX_BRACKET_NESTING as u64)
        );
    }

    #[test]
    fn bracket_pieces_cut_anywhere_give_the_same_answer() {
        let text = "# [\n<s> <p> \"\"\"[\"\"\" , ( [ <q> '(' ] ) , { <a> <b> \"}\" } .\n";
        let bytes = text.as_bytes();
        for max in [1, 2, 3] {
            let whole = NestingScanner::new(5).with_max_brackets(max).feed(bytes);
            for cut in 0..bytes.len() {
                let mut s = NestingScanner::new(5).with_max_brackets(max);
                let r = s.feed(&bytes[..cut]).and_then(|()| s.feed(&bytes[cut..]));
                assert_eq!(r, whole, "max {max}, cut at {cut}");
            }
        }
    }

    #[test]
    fn directive_ends_are_noted_where_their_iri_ends() {
        let text = "@prefix ex: <http://ex.org/> .\n\
                    PREFIX e2: <http://e2/>\n\
                    prefix e3:<http://e3/>\n\
                    @base <http://b/> .\n\
                    BASE <x/>\n\
                    @prefix : <> .\n\
                    @prefix:<colon>.\n\
                    @prefix # a comment\n  e4: # and one more\n <e4> .\n\
                    <s> <p> <o>.PREFIX e5: <e5>\n";
        let want: Vec<u64> = [
            "<http://ex.org/>",
            "<http://e2/>",
            "<http://e3/>",
            "<http://b/>",
            "<x/>",
            "<>",
            "<colon>",
            "<e4>",
            "<e5>",
        ]
        .iter()
        .map(|iri| (text.find(iri).unwrap() + iri.len()) as u64)
        .collect();
        for piece in [1, 2, 7, text.len()] {
            assert_eq!(directive_ends(text, piece), want, "pieces of {piece}");
        }
    }

    #[test]
    fn words_that_are_no_directives_note_nothing() {
        let text = "ex:a ex:prefix ex:base ; ex:p PREFIX:a , BASE:b , ex:a-prefix , ?prefix , \
                    _:base , \"@prefix e: <x>\" , '''PREFIX e: <y>''' , <prefix> , prefixes , \
                    basement , 1base .\n# PREFIX e: <z>\nex:a\\ prefix <w> .\n";
        assert_eq!(directive_ends(text, text.len()), Vec::<u64>::new());
        // A language tag may look like one: noted, which costs a reader a shorter read.
        let tag = "<s> <p> \"x\"@base , <o> .";
        assert_eq!(
            directive_ends(tag, 3),
            vec![tag.find("<o>").unwrap() as u64 + 3]
        );
    }

    /// The scanner fed one byte at a time through its state machine, as before runs
    /// were passed over whole: the reference the fast path must agree with.
    fn bytewise(mut s: NestingScanner, text: &[u8]) -> (NestingScanner, Option<TooDeep>) {
        for &b in text {
            if let Err(e) = s.byte(b) {
                return (s, Some(e));
            }
            s.offset += 1;
            if b == b'\n' {
                s.line += 1;
            }
        }
        (s, None)
    }

    proptest::proptest! {
        /// Texts made of the bytes that matter (and some that don't), in random pieces:
        /// the same depth, brackets, line, offset, state, directive ends and errors as
        /// byte by byte.
        #[test]
        fn runs_passed_over_whole_change_nothing(
            parts in proptest::collection::vec(
                proptest::sample::select(vec![
                    "<", ">", "<<(", ")>>", "<<", ">>", "\"", "'", "\"\"\"", "'''", "\\",
                    "#", "\n", "\r", " ", "[", "]", "(", ")", "{", "}", "|", "^", "`",
                    "@prefix", "PREFIX", "base", ":", "e:", "<http://ex.org/a#b>", "abc",
                    "\t", ".", "x\ny", "é",
                ]),
                0..60,
            ),
            piece in 1usize..9,
            noting in proptest::bool::ANY,
            max in 1usize..4,
        ) {
            let text = parts.concat();
            let fresh = || {
                let s = NestingScanner::new(max).with_max_brackets(max + 1);
                if noting { s.noting_directives() } else { s }
            };
            let (want, want_err) = bytewise(fresh(), text.as_bytes());
            let mut got = fresh();
            let mut got_err = None;
            for c in text.as_bytes().chunks(piece) {
                if let Err(e) = got.feed(c) {
                    got_err = Some(e);
                    break;
                }
            }
            proptest::prop_assert_eq!(got_err, want_err);
            proptest::prop_assert_eq!(format!("{got:?}"), format!("{want:?}"));
        }
    }
}
