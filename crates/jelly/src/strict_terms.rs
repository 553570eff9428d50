//! What a term of standard N-Triples / N-Quads may hold, checked as oxttl checks it:
//! absolute IRIs valid per RFC 3987 (oxiri), well-formed BCP 47 language tags
//! (oxilangtag), blank node labels of the grammar, and no `rdf:langString` /
//! `rdf:dirLangString` datatype. [`crate::nquads::LineParser::strict`] applies these
//! checks, so every path that reads N-Triples / N-Quads with it (the CLI's `to-jelly`,
//! the server's publish ingest) refuses what oxttl refuses.
//!
//! Blank node labels follow Turtle's `PN_CHARS_U`, without the `:` that the N-Triples
//! 1.1 grammar lists: the W3C test `nt-syntax-bad-bnode-02` (`_:abc:def`) is a negative
//! one, and oxttl refuses it too.

use std::collections::HashSet;

/// The bytes of distinct IRIs remembered as valid before the memory is cleared: real
/// data repeats IRIs heavily (bsbm, lubm), so a small cache skips most validations, and
/// clearing it when full keeps its memory bounded whatever the input.
const MAX_CACHED_IRI_BYTES: usize = 4 << 20;

/// The bookkeeping bytes counted per cached IRI on top of its text (a boxed string and
/// its hash table slot), so that many short IRIs cannot grow the cache past its bound.
const CACHE_ENTRY_OVERHEAD: usize = 32;

/// At most this many characters of a refused IRI or tag are quoted in a message.
const QUOTED_CHARS: usize = 120;

/// The term checks of strict N-Triples / N-Quads, with a cache of the IRIs already
/// found valid.
///
/// ```
/// let mut checks = jelly::strict_terms::StrictTerms::default();
/// assert!(checks.check_iri("http://example.org/a").is_ok());
/// assert!(checks.check_iri("http://example.org:80a/").is_err());
/// assert!(checks.check_iri("relative").unwrap_err().contains("is relative"));
/// ```
#[derive(Default)]
pub struct StrictTerms {
    /// IRIs already validated (each is an IRI `oxiri` accepts).
    valid_iris: HashSet<Box<str>, foldhash::fast::RandomState>,
    /// What `valid_iris` holds, counted as [`CACHE_ENTRY_OVERHEAD`] plus the text of each.
    cached_bytes: usize,
}

impl StrictTerms {
    /// Whether `iri` is an absolute IRI per RFC 3987; the message says what is wrong.
    pub fn check_iri(&mut self, iri: &str) -> Result<(), String> {
        if self.valid_iris.contains(iri) {
            return Ok(());
        }
        check_iri_uncached(iri)?;
        let cost = iri.len() + CACHE_ENTRY_OVERHEAD;
        if self.cached_bytes + cost > MAX_CACHED_IRI_BYTES {
            self.valid_iris.clear();
            self.cached_bytes = 0;
        }
        if cost <= MAX_CACHED_IRI_BYTES {
            self.valid_iris.insert(iri.into());
            self.cached_bytes += cost;
        }
        Ok(())
    }

    /// Whether `iri` may be a literal's datatype: a valid IRI that is not
    /// `rdf:langString` or `rdf:dirLangString` (those need a language tag).
    pub fn check_datatype(&mut self, iri: &str) -> Result<(), String> {
        if iri == RDF_LANG_STRING || iri == RDF_DIR_LANG_STRING {
            return Err(format!(
                "the datatype <{iri}> needs a language tag (write \"…\"@tag instead)"
            ));
        }
        self.check_iri(iri)
    }
}

const RDF_LANG_STRING: &str = "http://www.w3.org/1999/02/22-rdf-syntax-ns#langString";
const RDF_DIR_LANG_STRING: &str = "http://www.w3.org/1999/02/22-rdf-syntax-ns#dirLangString";

/// [`StrictTerms::check_iri`] without the cache.
fn check_iri_uncached(iri: &str) -> Result<(), String> {
    // oxiri refuses these too; the message names the character.
    if let Some(c) = crate::term::forbidden_iri_char(iri) {
        return Err(format!("an IRI cannot hold {c:?}"));
    }
    let Err(e) = oxiri::Iri::parse(iri) else {
        return Ok(());
    };
    if has_scheme(iri) {
        Err(format!("invalid IRI <{}>: {e}", quoted(iri)))
    } else {
        Err(format!(
            "the IRI <{}> is relative (N-Triples and N-Quads take absolute IRIs)",
            quoted(iri)
        ))
    }
}

/// Whether `iri` starts with an RFC 3986 scheme and its `:`.
fn has_scheme(iri: &str) -> bool {
    let b = iri.as_bytes();
    match b.iter().position(|&c| c == b':') {
        Some(n) if n > 0 => {
            b[0].is_ascii_alphabetic()
                && b[1..n]
                    .iter()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'-' | b'.'))
        }
        _ => false,
    }
}

/// Whether `tag` (as written after `@`, with an RDF 1.2 `--ltr` / `--rtl` direction if
/// any) is a language tag of N-Triples: `[a-zA-Z]+ ('-' [a-zA-Z0-9]+)*` and well-formed
/// per BCP 47, as oxilangtag checks it (so `en-abcdefghi`, a subtag of nine letters,
/// is refused).
///
/// ```
/// use jelly::strict_terms::check_language_tag;
/// assert!(check_language_tag("en-GB").is_ok() && check_language_tag("ar--rtl").is_ok());
/// assert!(check_language_tag("en-abcdefghi").is_err());
/// ```
pub fn check_language_tag(tag: &str) -> Result<(), String> {
    if !crate::term::valid_language_tag(tag) {
        return Err(format!("invalid language tag `{}`", quoted(tag)));
    }
    let language = tag.split_once("--").map_or(tag, |(l, _)| l);
    oxilangtag::LanguageTag::parse(language)
        .map(|_| ())
        .map_err(|e| format!("invalid language tag `{}`: {e}", quoted(tag)))
}

/// Whether `c` may start a blank node label: `PN_CHARS_U | [0-9]`.
pub fn blank_node_label_start(c: char) -> bool {
    pn_chars_u(c) || c.is_ascii_digit()
}

/// Whether `c` may continue a blank node label: `PN_CHARS | '.'` (a label cannot end
/// with `.`: the reader gives a trailing one back).
pub fn blank_node_label_char(c: char) -> bool {
    pn_chars_u(c)
        || c == '.'
        || matches!(c, '-' | '0'..='9' | '\u{00B7}' | '\u{0300}'..='\u{036F}' | '\u{203F}'..='\u{2040}')
}

/// `PN_CHARS_U ::= PN_CHARS_BASE | '_'` (see the module comment for `:`).
fn pn_chars_u(c: char) -> bool {
    matches!(c,
        'A'..='Z'
        | 'a'..='z'
        | '_'
        | '\u{00C0}'..='\u{00D6}'
        | '\u{00D8}'..='\u{00F6}'
        | '\u{00F8}'..='\u{02FF}'
        | '\u{0370}'..='\u{037D}'
        | '\u{037F}'..='\u{1FFF}'
        | '\u{200C}'..='\u{200D}'
        | '\u{2070}'..='\u{218F}'
        | '\u{2C00}'..='\u{2FEF}'
        | '\u{3001}'..='\u{D7FF}'
        | '\u{F900}'..='\u{FDCF}'
        | '\u{FDF0}'..='\u{FFFD}'
        | '\u{10000}'..='\u{EFFFF}')
}

/// The start of `text`, cut at a character boundary, for an error message.
fn quoted(text: &str) -> &str {
    match text.char_indices().nth(QUOTED_CHARS) {
        Some((i, _)) => &text[..i],
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iris_are_checked_by_oxiri_once_each() {
        let mut c = StrictTerms::default();
        for bad in [
            "http://[::1",
            "http://host:port/",
            "http://a b/",
            "http://e/%zz",
            "",
            "p",
            "//e/p",
        ] {
            assert!(c.check_iri(bad).is_err(), "{bad}");
            assert!(c.valid_iris.is_empty(), "{bad} was cached");
        }
        c.check_iri("http://e/a").unwrap();
        c.check_iri("http://e/a").unwrap();
        assert_eq!(c.valid_iris.len(), 1);
    }

    #[test]
    fn the_cache_stays_within_its_bound() {
        let mut c = StrictTerms::default();
        let mut iri = String::new();
        for i in 0..200_000 {
            iri.clear();
            iri.push_str("http://example.org/some/long/path/");
            iri.push_str(&i.to_string());
            c.check_iri(&iri).unwrap();
            assert!(c.cached_bytes <= MAX_CACHED_IRI_BYTES);
        }
        let huge = format!("http://e/{}", "a".repeat(MAX_CACHED_IRI_BYTES));
        c.check_iri(&huge).unwrap();
        assert!(c.cached_bytes <= MAX_CACHED_IRI_BYTES);
    }

    #[test]
    fn language_tags_must_be_well_formed() {
        for ok in [
            "en",
            "en-GB",
            "de-CH-1901",
            "en--ltr",
            "x-private",
            "zh-Hant-TW",
        ] {
            assert!(check_language_tag(ok).is_ok(), "{ok}");
        }
        for bad in [
            "en-abcdefghi",
            "1en",
            "en-",
            "en--up",
            "abcdefghi",
            "en_GB",
            "",
        ] {
            assert!(check_language_tag(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn messages_quote_a_bounded_part() {
        let long = format!("http://e:x/{}", "a".repeat(10_000));
        let e = StrictTerms::default().check_iri(&long).unwrap_err();
        assert!(e.len() < 1_000, "{}", e.len());
    }
}
