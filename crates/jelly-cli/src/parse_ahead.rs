//! Turtle and TriG parsed on a second thread, ahead of the thread that encodes.
//!
//! Why: on bsbm-1m as Turtle, oxttl's parsing (IRI validation most of all) took about
//! four fifths of `jelly rdf to-jelly`'s time and the encoding one fifth, one after the
//! other on one thread. Here they overlap on two cores.
//!
//! How, keeping today's behaviour to the byte:
//! - The input stays on the calling thread (its reader is not `Send`): the parser
//!   thread asks for the next chunk of bytes as it starts on one, so one chunk is read
//!   while another is parsed, and at most [`CHUNK_BYTES`] × 3 are in flight. A read
//!   error is handed to the parser after the bytes read before it, so it comes where
//!   the parser would have met it on one thread.
//! - The nesting guard ([`NestingScanner`], a tenth of the parser's time) runs on the
//!   reading thread, which has time to spare: each chunk goes with where directives
//!   end in it, and the parser thread's reads end there, as [`ScannedText`]'s do, for
//!   the namespace declarations. Text nested too deep is refused as on one thread,
//!   after the bytes before its opening.
//! - The parser is the same as on one thread ([`RdfSource::prescanned`]: the error
//!   messages with file, line and column). Its statements, the prefixes to declare
//!   before them, and its first error come back in order, in [`StatementBatch`]es of
//!   at most [`BATCH_STATEMENTS`] statements or about [`BATCH_BYTES`] of text,
//!   [`BATCHES_IN_FLIGHT`] of them at most, which come back to be filled again. So the
//!   encoder sees the statements before an error, and none after it, as before.

use std::cell::Cell;
use std::collections::VecDeque;
use std::io::{self, BufRead, Read};
use std::rc::Rc;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::JoinHandle;

use jelly::oxrdf_adapter::from_ox_quad;
use jelly::text_nesting::{MAX_TEXT_NESTING, NestingScanner};

use crate::error::{CliError, CliResult};
use crate::format::Format;
use crate::namespaces::NamespaceTracker;
#[cfg(doc)]
use crate::namespaces::ScannedText;
use crate::rdf_source::RdfSource;
use crate::statement_batch::{BatchEntry, StatementBatch};

/// Bytes of input handed to the parser thread at a time.
pub const CHUNK_BYTES: usize = 256 << 10;
/// Statements per batch handed back.
pub const BATCH_STATEMENTS: usize = 1024;
/// Text (IRIs, literals, blank node labels) per batch handed back, about: a batch
/// ends once it holds this much.
pub const BATCH_BYTES: usize = 256 << 10;
/// Batches the parser thread may be ahead by.
pub const BATCHES_IN_FLIGHT: usize = 4;

/// What the parser thread sends back.
enum Message {
    /// The next statements and prefixes.
    Batch(StatementBatch),
    /// The parser has started on the last chunk sent: read the next one.
    NeedInput,
    /// The first error; nothing follows.
    Failed(CliError),
    /// The end of the input; nothing follows.
    End,
}

/// A piece of input for the parser thread, scanned: its bytes (none at the end) and the
/// offsets in the input just after the directives that end in it. Or a read error.
type Chunk = io::Result<(Vec<u8>, Vec<u64>)>;

/// The statements of one Turtle or TriG input, parsed on a second thread.
///
/// ```
/// use jelly_cli::format::Format;
/// use jelly_cli::parse_ahead::ParseAhead;
/// use jelly_cli::statement_batch::BatchEntry;
/// let text = "@prefix ex: <http://ex/> .\nex:a ex:b ex:c , ex:d .\nex:e ex:f";
/// let mut p = ParseAhead::new(Box::new(text.as_bytes()), Format::Ttl, None, "in.ttl", false);
/// assert!(matches!(p.next_parsed(), Some(Ok(BatchEntry::Statement(_)))));
/// assert!(matches!(p.next_parsed(), Some(Ok(BatchEntry::Statement(_)))));
/// let e = p.next_parsed().unwrap().unwrap_err();
/// assert!(e.message.starts_with("in.ttl:3:10: "), "{}", e.message);
/// assert!(p.next_parsed().is_none());
/// ```
pub struct ParseAhead {
    reader: Box<dyn BufRead>,
    name: String,
    /// Both `None` once finished (then the parser thread is joined).
    chunks: Option<SyncSender<Chunk>>,
    messages: Option<Receiver<Message>>,
    /// Emptied batches, sent back to be filled again.
    recycle: Option<SyncSender<StatementBatch>>,
    worker: Option<JoinHandle<()>>,
    batch: StatementBatch,
    /// The next entry of `batch` to hand out.
    next: usize,
    /// The nesting guard, and the bytes it has gone through.
    scanner: NestingScanner,
    scanner_offset: u64,
    /// The end of the input or a read error was sent.
    input_done: bool,
}

impl ParseAhead {
    /// Starts parsing `reader` (input `name`, of `format`, Turtle or TriG) on a second
    /// thread; `base_iri` resolves relative IRIs, and with `want_prefixes` the
    /// prefixes come too. Errors (a bad base IRI too) come from
    /// [`next_parsed`](Self::next_parsed).
    pub fn new(
        reader: Box<dyn BufRead>,
        format: Format,
        base_iri: Option<&str>,
        name: &str,
        want_prefixes: bool,
    ) -> ParseAhead {
        // Room for every chunk the parser can have asked for (one ahead, plus a read
        // error after the bytes before it), so that sending one never waits.
        let (chunk_tx, chunk_rx) = sync_channel::<Chunk>(4);
        let (message_tx, message_rx) = sync_channel::<Message>(BATCHES_IN_FLIGHT);
        // Room for every batch there is, so that sending one back never waits.
        let (recycle_tx, recycle_rx) = sync_channel::<StatementBatch>(BATCHES_IN_FLIGHT + 2);
        let base_iri = base_iri.map(str::to_string);
        let worker_name = name.to_string();
        let worker = std::thread::Builder::new()
            .name("jelly-parse".into())
            .spawn(move || {
                parse(
                    chunk_rx,
                    message_tx,
                    recycle_rx,
                    format,
                    base_iri,
                    &worker_name,
                    want_prefixes,
                )
            });
        let mut ahead = ParseAhead {
            reader,
            name: name.to_string(),
            chunks: Some(chunk_tx),
            messages: Some(message_rx),
            recycle: Some(recycle_tx),
            worker: None,
            batch: StatementBatch::default(),
            next: 0,
            scanner: NestingScanner::new(MAX_TEXT_NESTING).noting_directives(),
            scanner_offset: 0,
            input_done: false,
        };
        match worker {
            Ok(w) => {
                ahead.worker = Some(w);
                // The first chunk, unasked.
                ahead.send_chunk();
            }
            // Without a thread, no messages come: next_parsed says the parser stopped.
            Err(_) => ahead.chunks = None,
        }
        ahead
    }

    /// The next statement or prefix, or the first error (then `None`).
    pub fn next_parsed(&mut self) -> Option<CliResult<BatchEntry<'_>>> {
        while self.next >= self.batch.len() {
            let message = self.messages.as_ref()?.recv();
            match message {
                Ok(Message::Batch(b)) => {
                    let mut done = std::mem::replace(&mut self.batch, b);
                    self.next = 0;
                    done.clear();
                    if let Some(r) = &self.recycle {
                        // Not taken back only once the parser thread has ended.
                        let _ = r.try_send(done);
                    }
                }
                Ok(Message::NeedInput) => self.send_chunk(),
                Ok(Message::Failed(e)) => {
                    self.finish();
                    return Some(Err(e));
                }
                Ok(Message::End) => {
                    self.finish();
                    return None;
                }
                Err(_) => {
                    self.finish();
                    return Some(Err(CliError::invalid(format!(
                        "{}: the parser thread stopped",
                        self.name
                    ))));
                }
            }
        }
        self.next += 1;
        self.batch.get(self.next - 1).map(Ok)
    }

    /// Reads the next chunk of input and sends it (or the end, or a read error after
    /// the bytes read before it).
    fn send_chunk(&mut self) {
        if self.input_done {
            return;
        }
        let Some(tx) = &self.chunks else {
            return;
        };
        let (mut bytes, mut error) = read_chunk(self.reader.as_mut());
        let last = read_all(&bytes);
        let start = self.scanner_offset;
        if let Err(deep) = self.scanner.feed(&bytes) {
            // The bytes before the opening that went too deep, then the refusal.
            let opening = deep.offset.saturating_sub(1).saturating_sub(start);
            bytes.truncate(usize::try_from(opening).unwrap_or(usize::MAX));
            error = Some(io::Error::new(io::ErrorKind::InvalidData, deep));
        }
        self.scanner_offset += bytes.len() as u64;
        let mut ends = Vec::new();
        while let Some(end) = self.scanner.take_directive_end() {
            ends.push(end);
        }
        // A send fails only once the parser thread has ended, which its message says.
        if !bytes.is_empty() {
            let _ = tx.send(Ok((bytes, ends)));
        }
        match error {
            Some(e) => {
                let _ = tx.send(Err(e));
                self.input_done = true;
            }
            None if last => {
                let _ = tx.send(Ok((Vec::new(), Vec::new())));
                self.input_done = true;
            }
            None => {}
        }
    }

    /// Closes the channels (so the parser thread ends if it has not) and joins it.
    fn finish(&mut self) {
        self.chunks = None;
        self.messages = None;
        self.recycle = None;
        if let Some(w) = self.worker.take() {
            // A panic of the parser thread has been reported as its stopping.
            let _ = w.join();
        }
    }
}

impl Drop for ParseAhead {
    fn drop(&mut self) {
        self.finish();
    }
}

/// Whether a chunk of this length was the last: [`read_chunk`] fills a chunk unless
/// the input ends.
fn read_all(bytes: &[u8]) -> bool {
    bytes.len() < CHUNK_BYTES
}

/// Reads up to [`CHUNK_BYTES`]; a read error is returned with the bytes read before it.
fn read_chunk(r: &mut dyn BufRead) -> (Vec<u8>, Option<io::Error>) {
    let mut buf = Vec::with_capacity(CHUNK_BYTES);
    while buf.len() < CHUNK_BYTES {
        let avail = match r.fill_buf() {
            Ok(a) => a,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return (buf, Some(e)),
        };
        if avail.is_empty() {
            break;
        }
        let take = avail.len().min(CHUNK_BYTES - buf.len());
        buf.extend_from_slice(&avail[..take]);
        r.consume(take);
    }
    (buf, None)
}

/// The input as the parser thread reads it: chunks from the reading thread, the next
/// one asked for as one is started; each read ends at the next directive end, and the
/// directives read past are counted (as [`ScannedText`] does).
struct ChunkReader {
    chunks: Receiver<Chunk>,
    ask: SyncSender<Message>,
    chunk: Vec<u8>,
    at: usize,
    /// Bytes handed over.
    handed: u64,
    /// Directive ends (offsets) not read past yet.
    ends: VecDeque<u64>,
    passed: Rc<Cell<u64>>,
    /// The end of the input came, or a read error (which is returned once).
    ended: bool,
}

impl Read for ChunkReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        // Asked for more: the parser has taken in all it was handed.
        while self.ends.front().is_some_and(|&end| end <= self.handed) {
            self.ends.pop_front();
            self.passed.set(self.passed.get() + 1);
        }
        while self.at == self.chunk.len() {
            if self.ended {
                return Ok(0);
            }
            match self.chunks.recv() {
                Ok(Ok((c, _))) if c.is_empty() => self.ended = true,
                Ok(Ok((c, ends))) => {
                    self.chunk = c;
                    self.at = 0;
                    self.ends.extend(ends);
                    // A full chunk may not be the last: have the next one read meanwhile.
                    if !read_all(&self.chunk) && self.ask.send(Message::NeedInput).is_err() {
                        return Err(io::Error::other("the encoding thread stopped"));
                    }
                }
                Ok(Err(e)) => {
                    self.ended = true;
                    return Err(e);
                }
                Err(_) => {
                    self.ended = true;
                    return Err(io::Error::other("the reading thread stopped"));
                }
            }
        }
        let mut n = buf.len().min(self.chunk.len() - self.at);
        // Every end left is past what was handed over, so at least one byte goes.
        if let Some(&end) = self.ends.front() {
            n = n.min(usize::try_from(end - self.handed).unwrap_or(usize::MAX));
        }
        buf[..n].copy_from_slice(&self.chunk[self.at..self.at + n]);
        self.at += n;
        self.handed += n as u64;
        Ok(n)
    }
}

/// The parser thread: parses the chunks and sends back batches, then the end or the
/// first error. Returns when done, or when the other thread no longer listens.
fn parse(
    chunks: Receiver<Chunk>,
    out: SyncSender<Message>,
    recycled: Receiver<StatementBatch>,
    format: Format,
    base_iri: Option<String>,
    name: &str,
    want_prefixes: bool,
) {
    let passed = Rc::new(Cell::new(0));
    let reader = ChunkReader {
        chunks,
        ask: out.clone(),
        chunk: Vec::new(),
        at: 0,
        handed: 0,
        ends: VecDeque::new(),
        passed: passed.clone(),
        ended: false,
    };
    let mut source = match RdfSource::prescanned(format, base_iri.as_deref(), reader, passed) {
        Ok(s) => s,
        Err(e) => {
            let _ = out.send(Message::Failed(e));
            return;
        }
    };
    let mut tracker = NamespaceTracker::default();
    let mut batch = StatementBatch::default();
    while let Some(q) = source.next_quad(name) {
        let q = match q {
            Ok(q) => q,
            Err(e) => {
                // The statements before the error first.
                if !batch.is_empty() && out.send(Message::Batch(batch)).is_err() {
                    return;
                }
                let _ = out.send(Message::Failed(e));
                return;
            }
        };
        if want_prefixes {
            for (prefix, iri) in tracker.before_statement(source.prefix_signal(), source.prefixes())
            {
                batch.push_prefix(&prefix, &iri, false);
            }
        }
        let mut holder = None;
        let mut st = from_ox_quad(q.as_ref(), &mut holder);
        if !format.is_dataset() {
            st.graph = None;
        }
        batch.push_statement(st);
        if batch.statements() == BATCH_STATEMENTS || batch.text_len() >= BATCH_BYTES {
            let empty = recycled.try_recv().unwrap_or_default();
            if out
                .send(Message::Batch(std::mem::replace(&mut batch, empty)))
                .is_err()
            {
                return;
            }
        }
    }
    if want_prefixes {
        for (prefix, iri) in tracker.at_end(source.prefixes()) {
            batch.push_prefix(&prefix, &iri, true);
        }
    }
    if !batch.is_empty() && out.send(Message::Batch(batch)).is_err() {
        return;
    }
    let _ = out.send(Message::End);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::namespaces::NamespaceTracker;
    #[cfg(doc)]
    use crate::namespaces::ScannedText;

    /// What one thread reads from `reader`: each prefix and statement (as text), then
    /// the error message if any.
    fn on_one_thread(format: Format, reader: impl Read, want_prefixes: bool) -> Vec<String> {
        let mut source = RdfSource::new(format, None, reader).unwrap();
        let mut tracker = NamespaceTracker::default();
        let mut out = Vec::new();
        while let Some(q) = source.next_quad("in") {
            let q = match q {
                Ok(q) => q,
                Err(e) => {
                    out.push(e.message);
                    return out;
                }
            };
            if want_prefixes {
                for (p, iri) in tracker.before_statement(source.prefix_signal(), source.prefixes())
                {
                    out.push(format!("prefix {p} {iri} false"));
                }
            }
            let mut holder = None;
            let mut st = from_ox_quad(q.as_ref(), &mut holder);
            if !format.is_dataset() {
                st.graph = None;
            }
            out.push(format!("{st:?}"));
        }
        if want_prefixes {
            for (p, iri) in tracker.at_end(source.prefixes()) {
                out.push(format!("prefix {p} {iri} true"));
            }
        }
        out
    }

    /// The same, read through [`ParseAhead`].
    fn ahead(format: Format, reader: Box<dyn BufRead>, want_prefixes: bool) -> Vec<String> {
        let mut p = ParseAhead::new(reader, format, None, "in", want_prefixes);
        let mut out = Vec::new();
        while let Some(e) = p.next_parsed() {
            out.push(match e {
                Ok(BatchEntry::Statement(st)) => format!("{st:?}"),
                Ok(BatchEntry::Prefix {
                    prefix,
                    iri,
                    at_end,
                }) => format!("prefix {prefix} {iri} {at_end}"),
                Err(e) => e.message,
            });
        }
        out
    }

    /// Asserts that `got` is `expected`, showing the first difference.
    fn assert_same(got: &[String], expected: &[String]) {
        let first = got.iter().zip(expected).position(|(a, b)| a != b);
        if let Some(i) = first {
            panic!("entry {i}: {} vs {}", got[i], expected[i]);
        }
        assert_eq!(got.len(), expected.len(), "{:?}", expected.last());
    }

    /// TriG of `n` statements in several graphs, with prefixes declared and redeclared
    /// along the way, long literals, labelled blank nodes (`[]` would get random
    /// labels), language tags and datatypes.
    fn varied_trig(n: usize) -> String {
        let mut t = String::from("@prefix ex: <http://ex/> .\n");
        for i in 0..n {
            if i % 700 == 0 {
                if i > 0 {
                    t.push_str("}\n");
                }
                // Between graphs (TriG has no directives inside one).
                if i % 4900 == 2100 {
                    t.push_str(&format!(
                        "PREFIX ex: <http://ex/{i}/>\n@prefix p{i}: <http://p/{i}#> .\n"
                    ));
                }
                t.push_str(&format!("ex:g{i} {{\n"));
            }
            t.push_str(&match i % 4 {
                0 => format!("ex:s{i} ex:p \"{}\"@en .\n", "long text ".repeat(i % 97)),
                1 => format!("_:b{i} ex:p \"{i}\"^^<http://www.w3.org/2001/XMLSchema#int> .\n"),
                2 => format!("ex:s{i} a ex:C ; ex:q ex:o{i} , _:o .\n"),
                _ => format!("<http://ex/é{i}> ex:p ex:o , \"x\\n{i}\" .\n"),
            });
        }
        t.push_str("}\n");
        t
    }

    #[test]
    fn statements_and_prefixes_come_in_the_order_one_thread_reads_them() {
        let text = varied_trig(40_000);
        // Several chunks and many batches.
        assert!(text.len() > 4 * CHUNK_BYTES, "{}", text.len());
        for want_prefixes in [false, true] {
            let expected = on_one_thread(Format::Trig, text.as_bytes(), want_prefixes);
            assert!(
                expected.len() > 40 * BATCH_STATEMENTS,
                "{:?}",
                expected.last()
            );
            let got = ahead(
                Format::Trig,
                Box::new(std::io::Cursor::new(text.clone().into_bytes())),
                want_prefixes,
            );
            assert_same(&got, &expected);
        }
        // Turtle: the statements lose their (default) graph, as on one thread.
        let text = "@prefix ex: <http://ex/> .\nex:a ex:b ex:c .\n";
        let got = ahead(Format::Ttl, Box::new(text.as_bytes()), false);
        assert_eq!(got, on_one_thread(Format::Ttl, text.as_bytes(), false));
        assert!(got[0].contains("graph: None"), "{}", got[0]);
    }

    /// Reads `text`, then fails with a read error.
    struct FailsAfter(std::io::Cursor<Vec<u8>>);
    impl Read for FailsAfter {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            match self.0.read(buf)? {
                0 => Err(io::Error::new(io::ErrorKind::InvalidData, "corrupt input")),
                n => Ok(n),
            }
        }
    }

    #[test]
    fn errors_come_after_the_statements_before_them_and_nothing_after() {
        let good = varied_trig(5_000);
        // A read error after the bytes read before it: a chunk and a half in, it
        // comes after the statements whole before it.
        let cut = (CHUNK_BYTES * 3 / 2).min(good.len() - 1);
        let bytes = good.as_bytes()[..cut].to_vec();
        let expected = on_one_thread(
            Format::Trig,
            FailsAfter(std::io::Cursor::new(bytes.clone())),
            false,
        );
        let got = ahead(
            Format::Trig,
            Box::new(io::BufReader::new(FailsAfter(std::io::Cursor::new(bytes)))),
            false,
        );
        assert_eq!(got.last().map(String::as_str), Some("in: corrupt input"));
        assert!(got.len() > 1000);
        assert_same(&got, &expected);
        // A syntax error deep in the input, with statements after it: its line and
        // column, after the statements before it, and none after it.
        let bad = good.replacen("ex:s4000 ", "ex:s4000 ex:p \"unclosed\n", 1);
        let line = bad[..bad.find("\"unclosed").unwrap_or_default()]
            .lines()
            .count();
        let expected = on_one_thread(Format::Trig, bad.as_bytes(), false);
        let got = ahead(
            Format::Trig,
            Box::new(std::io::Cursor::new(bad.into_bytes())),
            false,
        );
        let last = got.last().cloned().unwrap_or_default();
        assert!(last.starts_with(&format!("in:{line}:")), "{line}: {last}");
        // The 4,000 source lines before it hold 7,000 statements.
        assert_eq!(got.len(), 7001);
        assert_same(&got, &expected);
    }

    #[test]
    fn text_nested_too_deep_is_refused_after_the_statements_before_it() {
        let good = varied_trig(8_000);
        let graph_end = good.rfind("}\n").unwrap_or_default();
        let (head, tail) = good.split_at(graph_end);
        let deep = format!(
            "ex:s ex:p {}ex:o{} .\n",
            "<<( ex:a ex:b ".repeat(150),
            " )>>".repeat(150)
        );
        let bad = format!("{head}{deep}{tail}");
        let expected = on_one_thread(Format::Trig, bad.as_bytes(), false);
        let message = expected.last().cloned().unwrap_or_default();
        assert!(
            message.contains("nested deeper than 100 levels"),
            "{message}"
        );
        // Every statement before the deep one, then the same refusal (one thread may
        // give fewer: it stops at the start of the parser's read that holds the bytes).
        let mut before = on_one_thread(Format::Trig, format!("{head}}}\n").as_bytes(), false);
        before.push(message);
        let got = ahead(
            Format::Trig,
            Box::new(std::io::Cursor::new(bad.into_bytes())),
            false,
        );
        assert!(got.len() > 10_000);
        assert_same(&got, &before);
    }

    #[test]
    fn a_bad_base_iri_is_an_error_and_dropping_early_ends_the_thread() {
        let text = varied_trig(20_000);
        let mut p = ParseAhead::new(
            Box::new(std::io::Cursor::new(text.into_bytes())),
            Format::Trig,
            Some("not an IRI"),
            "in",
            false,
        );
        let e = p.next_parsed().unwrap().unwrap_err();
        assert!(
            e.message.starts_with("--base-iri not an IRI: "),
            "{}",
            e.message
        );
        assert!(p.next_parsed().is_none());
        // Dropped after one statement, with the parser thread blocked on a full
        // channel: the drop joins it (a hang would fail the test).
        let text = varied_trig(20_000);
        let mut p = ParseAhead::new(
            Box::new(std::io::Cursor::new(text.into_bytes())),
            Format::Trig,
            None,
            "in",
            false,
        );
        assert!(matches!(
            p.next_parsed(),
            Some(Ok(BatchEntry::Statement(_)))
        ));
        drop(p);
    }
}
