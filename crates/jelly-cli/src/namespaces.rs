//! Noticing the prefixes an RDF text parser declares, for `--enable-namespace-declarations`,
//! at a cost that does not grow with the number of prefixes at every statement.
//!
//! Why: the parsers tell their prefixes only as a whole map. Comparing that map before
//! every statement cost O(prefixes) per statement: 40,000 prefixes took 131 s (0.42 s
//! without the flag), and 1,000 prefixes and a million statements 34 s (2.7 s). Two
//! things keep it down:
//! - For Turtle, TriG and N3, [`ScannedText`] ends each read of the parser's input just
//!   after a directive (`@prefix`, `PREFIX`, `@base`, `BASE`), found by
//!   [`NestingScanner::noting_directives`]. The parser asks for more only once it has
//!   taken in what it has (`oxttl` reads when its lexer runs out of bytes, and a
//!   directive's IRI is whole at its `>`), so from that read on the directive is in its
//!   map, and its statements after it are returned after it: the count of directives
//!   passed tells exactly when the map may have changed.
//! - Comparing the map is spread out: [`NamespaceTracker`] compares it again only
//!   when the statements since the last comparison, at [`ENTRIES_PER_STATEMENT`] each,
//!   pay for what that comparison went through. A map of up to that many prefixes is
//!   compared before every statement where it may have changed, as before; a larger
//!   one that keeps changing has its changes declared up to (prefixes /
//!   [`ENTRIES_PER_STATEMENT`]) statements late, and never lost (the map is compared
//!   once more at the end of the input).

use std::cell::Cell;
use std::collections::{HashMap, VecDeque};
use std::io::{self, Read};
use std::rc::Rc;

use jelly::text_nesting::NestingScanner;

/// Prefix-map entries a comparison may go through per statement since the last one.
pub const ENTRIES_PER_STATEMENT: usize = 32;

/// What a source can tell about when its prefixes may have changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrefixSignal {
    /// Nothing: they may change before any statement (RDF/XML, JSON-LD).
    Unknown,
    /// The number of directives the parser has taken in so far (Turtle, TriG, N3).
    Directives(u64),
}

/// Text read through a [`NestingScanner`] (which refuses deep nesting); when it notes
/// directives, each read ends just after one, and the directives the reader of this
/// has gone past are counted.
///
/// ```
/// use std::io::Read;
/// use jelly::text_nesting::NestingScanner;
/// use jelly_cli::namespaces::ScannedText;
/// let text = "@prefix a: <http://a/> .\n<s> <p> <o> .\n";
/// let mut r = ScannedText::new(text.as_bytes(), NestingScanner::new(100).noting_directives());
/// let passed = r.directives_passed();
/// let mut buf = [0u8; 64];
/// assert_eq!(r.read(&mut buf).unwrap(), 22); // up to the `>` of <http://a/>
/// assert_eq!(passed.get(), 0);
/// assert_eq!(r.read(&mut buf).unwrap(), text.len() - 22);
/// assert_eq!(passed.get(), 1);
/// ```
pub struct ScannedText<R> {
    inner: R,
    scanner: NestingScanner,
    /// Bytes read and scanned, not handed over yet (after a directive's end).
    held: Vec<u8>,
    held_from: usize,
    /// Bytes handed over.
    handed: u64,
    /// Directive ends (offsets) not gone past yet.
    ends: VecDeque<u64>,
    passed: Rc<Cell<u64>>,
}

impl<R: Read> ScannedText<R> {
    /// `inner`, read through `scanner`.
    pub fn new(inner: R, scanner: NestingScanner) -> ScannedText<R> {
        ScannedText {
            inner,
            scanner,
            held: Vec::new(),
            held_from: 0,
            handed: 0,
            ends: VecDeque::new(),
            passed: Rc::new(Cell::new(0)),
        }
    }

    /// The count of directives whose end the reader has read past: shared, it follows
    /// the reads.
    pub fn directives_passed(&self) -> Rc<Cell<u64>> {
        self.passed.clone()
    }

    /// How many of `available` bytes, starting at the offset handed over so far, to hand
    /// over now: up to the next directive end.
    fn up_to_next_end(&self, available: usize) -> usize {
        match self.ends.front() {
            Some(&end) => available.min(usize::try_from(end - self.handed).unwrap_or(usize::MAX)),
            None => available,
        }
    }
}

impl<R: Read> Read for ScannedText<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        // Asked for more: the reader has taken in all it was handed.
        while self.ends.front().is_some_and(|&end| end <= self.handed) {
            self.ends.pop_front();
            self.passed.set(self.passed.get() + 1);
        }
        if self.held_from < self.held.len() {
            let rest = &self.held[self.held_from..];
            let n = self.up_to_next_end(rest.len().min(buf.len()));
            buf[..n].copy_from_slice(&rest[..n]);
            self.held_from += n;
            self.handed += n as u64;
            return Ok(n);
        }
        self.held.clear();
        self.held_from = 0;
        let read = self.inner.read(buf)?;
        self.scanner
            .feed(&buf[..read])
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        while let Some(end) = self.scanner.take_directive_end() {
            self.ends.push_back(end);
        }
        // Every end noted is past what was handed over, so at least one byte goes.
        let n = self.up_to_next_end(read);
        self.held.extend_from_slice(&buf[n..read]);
        self.handed += n as u64;
        Ok(n)
    }
}

/// Notices new or redefined prefixes in a parser's prefix map.
#[derive(Debug, Default)]
pub struct NamespaceTracker {
    declared: HashMap<String, String>,
    /// Entries the last comparison went through.
    last_cost: usize,
    /// Statements since the last comparison.
    since: usize,
    /// Directives taken in at the last signal.
    directives: u64,
    /// The map may have changed since the last comparison.
    pending: bool,
}

impl NamespaceTracker {
    /// The prefixes to declare before the next statement: new or changed since the last
    /// call, sorted by name. `prefixes` is the parser's map now.
    pub fn before_statement<'a>(
        &mut self,
        signal: PrefixSignal,
        prefixes: impl Iterator<Item = (&'a str, &'a str)>,
    ) -> Vec<(String, String)> {
        self.since = self.since.saturating_add(1);
        match signal {
            PrefixSignal::Unknown => self.pending = true,
            PrefixSignal::Directives(n) => {
                if n != self.directives {
                    self.directives = n;
                    self.pending = true;
                }
            }
        }
        if !self.pending || self.since.saturating_mul(ENTRIES_PER_STATEMENT) < self.last_cost {
            return Vec::new();
        }
        self.compare(prefixes)
    }

    /// The prefixes to declare at the end of the input, new or changed since the last
    /// call.
    pub fn at_end<'a>(
        &mut self,
        prefixes: impl Iterator<Item = (&'a str, &'a str)>,
    ) -> Vec<(String, String)> {
        self.compare(prefixes)
    }

    fn compare<'a>(
        &mut self,
        prefixes: impl Iterator<Item = (&'a str, &'a str)>,
    ) -> Vec<(String, String)> {
        // An iterator may go through more entries than it yields (JSON-LD's goes through
        // every term of the context): its upper bound counts them.
        let mut cost = prefixes.size_hint().1.unwrap_or(0);
        let mut out = Vec::new();
        let mut seen = 0usize;
        for (k, v) in prefixes {
            seen += 1;
            if self.declared.get(k).is_none_or(|old| old != v) {
                out.push((k.to_string(), v.to_string()));
            }
        }
        cost = cost.max(seen);
        out.sort();
        for (k, v) in &out {
            self.declared.insert(k.clone(), v.clone());
        }
        self.last_cost = cost;
        self.since = 0;
        self.pending = false;
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The parser's map before each statement of `text` (Turtle) and at the end, and
    /// the directive counts `ScannedText` gave then.
    fn maps_and_signals(text: &str, piece: usize) -> Vec<(Vec<(String, String)>, u64)> {
        /// Hands over at most `piece` bytes per read, as a slow input would.
        struct Pieces<'a>(&'a [u8], usize);
        impl Read for Pieces<'_> {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                let n = self.0.len().min(self.1).min(buf.len());
                buf[..n].copy_from_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                Ok(n)
            }
        }
        let r = ScannedText::new(
            Pieces(text.as_bytes(), piece),
            NestingScanner::new(100).noting_directives(),
        );
        let passed = r.directives_passed();
        let mut p = oxttl::TurtleParser::new()
            .with_base_iri("http://base/")
            .unwrap()
            .for_reader(r);
        let mut out = Vec::new();
        loop {
            let next = p.next();
            let mut map: Vec<(String, String)> = p
                .prefixes()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            map.sort();
            out.push((map, passed.get()));
            match next {
                Some(t) => {
                    t.unwrap();
                }
                None => return out,
            }
        }
    }

    /// Turtle that declares and redeclares prefixes between statements, with comments,
    /// strings and names that only look like directives.
    const CHANGING: &str = "@prefix a: <http://a/> .\n\
        a:s a:p a:o .\n\
        a:s a:p \"@prefix b: <http://no/> .\" , '''PREFIX c: <http://no/>''' .\n\
        # @prefix d: <http://no/> .\n\
        PREFIX b: <http://b/>\n\
        a:s a:prefix b:o ; b:base [ a:p ( a:x a:y ) ] .\n\
        @prefix a: <http://a2/> .\n\
        a:s a:p a:o .\n\
        @base <http://base2/> . @prefix r: <rel/> . prefix r2:<rel2/>\n\
        r:s r2:p \"x\"@base .\n\
        a:s a:p a:o .\n\
        @prefix e: <http://e/> .\n";

    #[test]
    fn the_directive_count_moves_exactly_when_the_map_does() {
        for piece in [1, 3, 7, 64, 4096] {
            let steps = maps_and_signals(CHANGING, piece);
            for w in steps.windows(2) {
                let ((m0, d0), (m1, d1)) = (&w[0], &w[1]);
                assert!(d1 >= d0, "pieces of {piece}");
                if m0 != m1 {
                    assert!(d1 > d0, "pieces of {piece}: {m0:?} -> {m1:?} unsignalled");
                }
            }
            let (last, _) = steps.last().unwrap();
            assert!(
                last.contains(&("r".into(), "http://base2/rel/".into())),
                "{last:?}"
            );
            assert!(last.contains(&("e".into(), "http://e/".into())), "{last:?}");
        }
    }

    /// What the tracker declares before each statement, against comparing the whole
    /// map every time (the former way): the same, for small maps.
    #[test]
    fn declares_what_a_full_comparison_declares() {
        for piece in [1, 5, 4096] {
            let steps = maps_and_signals(CHANGING, piece);
            let mut t = NamespaceTracker::default();
            let mut full: HashMap<String, String> = HashMap::new();
            for (i, (map, passed)) in steps.iter().enumerate() {
                let it = map.iter().map(|(k, v)| (k.as_str(), v.as_str()));
                let got = if i + 1 == steps.len() {
                    t.at_end(it)
                } else {
                    t.before_statement(PrefixSignal::Directives(*passed), it)
                };
                let mut want: Vec<(String, String)> = map
                    .iter()
                    .filter(|(k, v)| full.get(k) != Some(v))
                    .cloned()
                    .collect();
                want.sort();
                for (k, v) in &want {
                    full.insert(k.clone(), v.clone());
                }
                assert_eq!(got, want, "pieces of {piece}, step {i}");
            }
        }
    }

    /// The cost: entries of the map gone through. A map that does not change is gone
    /// through once, however many statements follow; one that changes at every
    /// statement, about [`ENTRIES_PER_STATEMENT`] entries per statement.
    #[test]
    fn entries_gone_through_grow_with_changes_not_with_statements_times_prefixes() {
        let visits = std::cell::Cell::new(0usize);
        let map: Vec<(String, String)> = (0..1000)
            .map(|i| (format!("p{i}"), format!("http://p/{i}/")))
            .collect();
        let counted = |n: usize| {
            let visits = &visits;
            map[..n].iter().map(move |(k, v)| {
                visits.set(visits.get() + 1);
                (k.as_str(), v.as_str())
            })
        };
        let mut t = NamespaceTracker::default();
        assert_eq!(
            t.before_statement(PrefixSignal::Directives(1), counted(1000))
                .len(),
            1000
        );
        for _ in 0..100_000 {
            t.before_statement(PrefixSignal::Directives(1), counted(1000));
        }
        t.at_end(counted(1000));
        assert_eq!(visits.get(), 2000);
        // Growing by one prefix before each of 1000 statements.
        visits.set(0);
        let mut t = NamespaceTracker::default();
        let mut declared = 0;
        for n in 1..=1000 {
            declared += t
                .before_statement(PrefixSignal::Directives(n as u64), counted(n))
                .len();
        }
        declared += t.at_end(counted(1000)).len();
        assert_eq!(declared, 1000);
        assert!(
            visits.get() < 1000 * 2 * ENTRIES_PER_STATEMENT,
            "{}",
            visits.get()
        );
    }

    #[test]
    fn a_large_changing_map_is_compared_on_budget_and_nothing_is_lost() {
        let mut t = NamespaceTracker::default();
        let mut map: Vec<(String, String)> = Vec::new();
        let mut declared = Vec::new();
        let mut comparisons = 0;
        for i in 0..1000u64 {
            map.push((format!("p{i}"), format!("http://p/{i}/")));
            let got = t.before_statement(
                PrefixSignal::Directives(i + 1),
                map.iter().map(|(k, v)| (k.as_str(), v.as_str())),
            );
            comparisons += usize::from(!got.is_empty());
            declared.extend(got);
        }
        // A rebinding of one of them, then the end.
        map[7].1 = "http://rebound/".into();
        declared.extend(t.before_statement(
            PrefixSignal::Directives(1001),
            map.iter().map(|(k, v)| (k.as_str(), v.as_str())),
        ));
        declared.extend(t.at_end(map.iter().map(|(k, v)| (k.as_str(), v.as_str()))));
        assert!(comparisons < 250, "{comparisons} comparisons");
        assert_eq!(declared.len(), 1001);
        let p7: Vec<&str> = declared
            .iter()
            .filter(|(k, _)| k == "p7")
            .map(|(_, v)| v.as_str())
            .collect();
        assert_eq!(p7, ["http://p/7/", "http://rebound/"]);
        // Without a signal nothing is compared: a map that did not change costs nothing.
        let mut t = NamespaceTracker::default();
        let it = || map.iter().map(|(k, v)| (k.as_str(), v.as_str()));
        assert_eq!(
            t.before_statement(PrefixSignal::Directives(1), it()).len(),
            1000
        );
        for _ in 0..100_000 {
            assert!(
                t.before_statement(PrefixSignal::Directives(1), it())
                    .is_empty()
            );
        }
        assert!(t.at_end(it()).is_empty());
    }
}
