//! How deeply RDF 1.2 triple terms (`<<( … )>>`) and reified triples (`<< … >>`) nest
//! in N-Triples, N-Quads, Turtle or TriG text, found without parsing it.
//!
//! Why: the text parsers and what is built from their terms recurse once per level,
//! so a body of a few hundred kilobytes of `<<(` overflowed a thread's stack and
//! aborted the process. [`NestingScanner`] reads the text ahead of the parser (in
//! pieces, as it streams) and stops it at a depth that Jelly decoders refuse anyway
//! ([`crate::DecoderOptions::max_nesting`], 100 by default).
//!
//! It follows just enough of the syntax to find `<<` and `>>` outside IRIs, strings
//! (short and long, with escapes) and comments. A `\` outside them escapes the next
//! byte, as in Turtle's local names (`ex:a\#b` is no comment).

/// The default depth limit, the decoders' own.
pub const MAX_TEXT_NESTING: usize = 100;

/// Text nested deeper than the limit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "triple terms or reified triples nested deeper than {max} levels (line {line}, byte offset {offset})"
)]
pub struct TooDeep {
    /// The limit.
    pub max: usize,
    /// 1-based line of the `<<` that went past the limit.
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

/// Reads text piece by piece and refuses it once triple terms nest deeper than `max`.
///
/// ```
/// use jelly::text_nesting::NestingScanner;
/// let mut s = NestingScanner::new(2);
/// s.feed(b"<s> <p> <<( <a> <b> \"<<\" )>> .\n").unwrap();
/// let deep = b"<s> <p> <<( <a> <b> <<( <c> <d> <<( <e> <f> <g> )>> )>> )>> .";
/// let e = NestingScanner::new(2).feed(deep).unwrap_err();
/// assert_eq!((e.line, e.offset), (1, 33));
/// ```
#[derive(Debug, Clone)]
pub struct NestingScanner {
    max: usize,
    depth: usize,
    state: State,
    line: u64,
    offset: u64,
}

impl NestingScanner {
    /// A scanner that refuses nesting deeper than `max`.
    pub fn new(max: usize) -> NestingScanner {
        NestingScanner {
            max,
            depth: 0,
            state: State::Normal,
            line: 1,
            offset: 0,
        }
    }

    /// Reads the next piece of the text.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<(), TooDeep> {
        for &b in bytes {
            self.byte(b)?;
            self.offset += 1;
            if b == b'\n' {
                self.line += 1;
            }
        }
        Ok(())
    }

    fn byte(&mut self, b: u8) -> Result<(), TooDeep> {
        use State::*;
        self.state = match self.state {
            Normal => self.normal(b),
            Escaped => Normal,
            // As the parsers: a comment ends at a line feed or a carriage return.
            Comment if b == b'\n' || b == b'\r' => Normal,
            Comment => Comment,
            Lt if b == b'<' => {
                self.depth += 1;
                if self.depth > self.max {
                    return Err(TooDeep {
                        max: self.max,
                        line: self.line,
                        offset: self.offset,
                    });
                }
                Normal
            }
            Lt | Iri if b == b'>' || b == b'\n' => Normal,
            Lt | Iri => Iri,
            Gt if b == b'>' => {
                self.depth = self.depth.saturating_sub(1);
                Normal
            }
            Gt => self.normal(b),
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
            Quotes { count: 2, .. } => self.normal(b),
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

    fn normal(&self, b: u8) -> State {
        match b {
            b'#' => State::Comment,
            b'\\' => State::Escaped,
            b'<' => State::Lt,
            b'>' => State::Gt,
            b'"' | b'\'' => State::Quotes { q: b, count: 1 },
            _ => State::Normal,
        }
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
                      # <<<<<<<<\n<http://e/a<<> <p> ex:a\\#b .\n";
        assert!(depth_ok(hidden, 0), "{hidden}");
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
}
