//! `jelly subscribe`: follow a topic of a running server, resuming after disconnects.
//!
//! The client always asks the server for Jelly (compact on the wire, and every frame
//! carries its item's `offset` in the frame metadata), remembers the last offset it
//! wrote, and after a disconnect reconnects with `from=<last + 1>`: a new stream,
//! decoded with a new decoder. Output is written in the requested format by the client,
//! so a resumed subscription continues one output stream without gaps or duplicates.

use std::io::Write;
use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};
use jelly::{Decoder, Encoder, Event, Statement};

use crate::error::{CliError, CliResult};
use crate::io::{Output, open_output_append, open_output_live};
use crate::publish::{items_url, percent_encode};

pub const SUBSCRIBE_HELP: &str = "\
Examples:
  jelly subscribe weather
  jelly subscribe weather --from latest --format jelly --to live.jelly
  jelly subscribe weather --from 120 --max-items 10
  jelly subscribe weather --from ts:1700000000000 --no-follow --format trig
  jelly subscribe weather --to live.jelly --append   # run again: goes on where it stopped

--from takes earliest, latest, an offset, ts:<ms since the epoch> or last:<n>.
Without --no-follow the subscription follows new items until interrupted (Ctrl-C or
SIGTERM: the output is finished, a compressed file included, and it exits 0); when the
connection breaks it reconnects from the offset after the last item written, or where
the first connection started (giving up after --retry-secs without success, counted
from the loss). Frames over --max-frame-size and answers that are not Jelly are
errors (exit 1). A topic that does not exist yet is waited
for (without --no-follow; with it, a 404 is an error); one that is deleted while followed ends the command with an error (exit 1), even
when a new topic of the same name appears, whose offsets start over. Jelly output
keeps each item as one frame with its metadata (offset, ts, source, h:*); the first
frame also names the topic (topic, topic_id), so that --append continues only the same
topic.

Exit codes: 0 done, 1 the offset is no longer retained, the topic was deleted or the
server refused the request, 2 usage or I/O error, or the server could not be reached.";

/// Checks a `--from` value's syntax here, so that a typo is a usage error (exit 2)
/// rather than the server's 400 after connecting.
fn start_position(s: &str) -> Result<String, String> {
    // Read as the server reads it.
    let number = |n: &str| jelly_server::position::number(n).is_some();
    let ok = matches!(s, "earliest" | "latest")
        || s.strip_prefix("ts:").is_some_and(number)
        || s.strip_prefix("last:").is_some_and(number)
        || number(s);
    if ok {
        Ok(s.to_string())
    } else {
        Err("expected earliest, latest, an offset, ts:<milliseconds> or last:<n>".into())
    }
}

/// Output formats of `jelly subscribe`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SubFormat {
    /// Delimited Jelly, one frame per item with its metadata.
    Jelly,
    /// N-Quads
    #[value(alias = "nquads")]
    Nq,
    /// N-Triples (the graph of quads is dropped)
    #[value(alias = "ntriples")]
    Nt,
    /// TriG, one block per item
    Trig,
    /// Turtle, one block per item (the graph of quads is dropped)
    #[value(alias = "turtle")]
    Ttl,
}

#[derive(Debug, Args)]
pub struct SubscribeArgs {
    /// The topic.
    pub topic: String,
    /// Server URL.
    #[arg(
        long,
        default_value = "http://127.0.0.1:8686",
        value_name = "URL",
        value_parser = crate::server_client::server_url
    )]
    pub server: String,
    /// Bearer token for a server with `[auth]` (default: the JELLY_TOKEN environment
    /// variable). Sent as `Authorization: Bearer`.
    #[arg(long, value_name = "TOKEN")]
    pub token: Option<String>,
    /// PEM file of the certificate authorities to trust for an `https://` server, in
    /// addition to the system's (for a server with a private CA).
    #[arg(long, value_name = "FILE")]
    pub cacert: Option<std::path::PathBuf>,
    /// Where to start: earliest, latest, an offset, `ts:<ms>` or `last:<n>` (default
    /// earliest; with --append to a Jelly file, after the last item it holds).
    #[arg(long, value_name = "FROM", value_parser = start_position)]
    pub from: Option<String>,
    /// Output format (default: from the --to file's extension, else nq).
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub format: Option<SubFormat>,
    /// Output file (default stdout).
    #[arg(long = "to", short = 'o', value_name = "FILE")]
    pub to: Option<String>,
    /// Add to the --to file instead of replacing it. A Jelly file goes on as one
    /// stream from the item after the last one it holds (its frames carry their
    /// offsets), so a restarted command neither skips nor repeats items; a last frame
    /// cut off mid-write is cut back first. A non-empty text file needs --from.
    #[arg(long, requires = "to")]
    pub append: bool,
    /// Stop after this many items.
    #[arg(long = "max-items", value_name = "N")]
    pub max_items: Option<u64>,
    /// Stop at the end of what the topic holds now instead of following it.
    #[arg(long = "no-follow")]
    pub no_follow: bool,
    /// Poll for I/O instead of sleeping between items (lower latency for sparse
    /// items; keeps one CPU busy while subscribed).
    #[arg(long = "busy-poll")]
    pub busy_poll: bool,
    /// Give up reconnecting after this many seconds without success (the last attempt
    /// comes at the end of them; 0: give up at the first failure).
    #[arg(long = "retry-secs", default_value_t = 30, value_name = "SECS")]
    pub retry_secs: u64,
}

/// Where items go: an output opened at the start, or (with `--append`) a file opened
/// at the first item, so that a run refused before it (other options, no item) leaves
/// the file as it was, compressed or not.
enum OutSlot {
    Open(Box<Output>),
    /// A file opened when the first item is written: with `append`, added to;
    /// otherwise replaced. A run that fails before (an unknown topic, a server that
    /// is down, a format the topic cannot take) leaves an existing file as it was.
    Lazy {
        path: String,
        append: bool,
    },
}

impl OutSlot {
    fn get(&mut self) -> CliResult<&mut Output> {
        if let OutSlot::Lazy { path, append } = self {
            let out = if *append {
                open_output_append(path)?
            } else {
                crate::io::open_output_live(Some(path))?
            };
            *self = OutSlot::Open(Box::new(out));
        }
        match self {
            OutSlot::Open(o) => Ok(o),
            OutSlot::Lazy { .. } => unreachable!("opened above"),
        }
    }

    /// Finishes the output. A file to be replaced that got no item is made (empty)
    /// when the run succeeded, as any output of a run that found nothing; after a
    /// failed or interrupted run it is left alone.
    fn finish(mut self, succeeded: bool) -> CliResult<()> {
        if succeeded && matches!(self, OutSlot::Lazy { append: false, .. }) {
            self.get()?;
        }
        match self {
            OutSlot::Open(o) => o.finish().map_err(|e| CliError::io("output", &e)),
            OutSlot::Lazy { .. } => Ok(()),
        }
    }
}

/// Writes received items.
struct Sink {
    format: SubFormat,
    out: OutSlot,
    enc: Option<Encoder>,
    buf: Vec<u8>,
    /// With `--append` to a Jelly file: the options of the stream it holds, which the
    /// appended frames must repeat (a stream's options never change).
    continues: Option<(String, jelly::StreamOptions)>,
    /// The topic followed.
    topic: String,
}

impl Sink {
    fn item(
        &mut self,
        topic_id: Option<&str>,
        options: Option<&jelly::StreamOptions>,
        meta: &[(String, Vec<u8>)],
        statements: &[Statement],
    ) -> CliResult {
        let io = |e: std::io::Error| CliError::io("output", &e);
        // Decided from the stream's options, as the server decides its own Turtle and
        // TriG: failing at the first item that cannot be written would fail again at
        // it on every resume.
        if matches!(self.format, SubFormat::Ttl | SubFormat::Trig)
            && let Some(what) = options.and_then(jelly::oxrdf_adapter::not_representable_in)
        {
            return Err(CliError::usage(format!(
                "this topic allows {what}: Turtle and TriG cannot carry them; \
                 use --format nt, nq or jelly"
            )));
        }
        self.buf.clear();
        match self.format {
            SubFormat::Jelly => {
                if self.enc.is_none() {
                    let mut o = options
                        .cloned()
                        .ok_or_else(|| CliError::invalid("the stream has no options row"))?;
                    o.version = 0;
                    // Spliceable (the default): the tables' first entries and first name
                    // id are written out, not left to the `0 = previous + 1` shorthand,
                    // so a stream continued with --append (whose "previous" would be the
                    // file's last entry), or files joined with `cat`, decode right.
                    let cfg = jelly::EncoderConfig::default();
                    let enc = Encoder::with_config(o, cfg)
                        .map_err(|e| CliError::invalid(e.to_string()))?;
                    if let Some((name, held)) = &self.continues
                        && held != enc.options()
                    {
                        return Err(CliError::usage(format!(
                            "cannot append to {name}: it holds a stream of other options \
                             than this topic's ({}); write to another file",
                            crate::validate::option_differences(enc.options(), held).join(", ")
                        )));
                    }
                    self.enc = Some(enc);
                    // The topic's id goes with the stream's first frame, so that a later
                    // `--append` resumes only in the same topic (not in one created
                    // again under its name, whose offsets start over).
                    if let (Some(id), Some(enc)) = (topic_id, self.enc.as_mut()) {
                        enc.set_frame_metadata(TOPIC_KEY, self.topic.as_bytes().to_vec());
                        enc.set_frame_metadata(TOPIC_ID_KEY, id.as_bytes().to_vec());
                    }
                }
                let enc = self.enc.as_mut().expect("set above");
                for st in statements {
                    enc.add(st.as_ref())
                        .map_err(|e| CliError::invalid(e.to_string()))?;
                }
                if enc.graph_open() {
                    enc.end_graph()
                        .map_err(|e| CliError::invalid(e.to_string()))?;
                }
                for (k, v) in meta {
                    enc.set_frame_metadata(k.clone(), v.clone());
                }
                enc.finish_frame_into(&mut self.buf, true);
            }
            SubFormat::Nq => {
                for st in statements {
                    let _ = writeln!(self.buf, "{st}");
                }
            }
            SubFormat::Nt => {
                for st in statements {
                    let mut st = st.clone();
                    st.graph = None;
                    let _ = writeln!(self.buf, "{st}");
                }
            }
            SubFormat::Ttl => {
                let mut ser = oxttl::TurtleSerializer::new().for_writer(&mut self.buf);
                for st in statements {
                    let q = st
                        .as_ref()
                        .to_oxrdf_quad()
                        .map_err(|e| CliError::invalid(e.to_string()))?;
                    ser.serialize_triple(oxrdf::TripleRef::from(q.as_ref()))
                        .map_err(io)?;
                }
                ser.finish().map_err(io)?;
            }
            SubFormat::Trig => {
                let mut ser = oxttl::TriGSerializer::new().for_writer(&mut self.buf);
                for st in statements {
                    let q = st
                        .as_ref()
                        .to_oxrdf_quad()
                        .map_err(|e| CliError::invalid(e.to_string()))?;
                    ser.serialize_quad(q.as_ref()).map_err(io)?;
                }
                ser.finish().map_err(io)?;
            }
        }
        let out = self.out.get()?;
        out.write_all(&self.buf).map_err(io)?;
        out.flush().map_err(io)
    }
}

/// What a file given with `--append` holds already.
#[derive(Debug, Default, PartialEq)]
struct Existing {
    /// The options of the Jelly stream in it (`None`: no Jelly stream, or empty).
    options: Option<jelly::StreamOptions>,
    /// The offset its last item had on the server (a Jelly file's last frame's
    /// `offset` metadata).
    last_offset: Option<u64>,
    /// Whether it holds anything.
    non_empty: bool,
    /// The id of the topic its items came from (the last `topic_id` in its frames).
    topic_id: Option<String>,
    /// The name of that topic (the last `topic` in its frames).
    topic: Option<String>,
}

/// Frame metadata of `jelly subscribe`'s Jelly output: the id of the topic (the server's
/// `X-Jelly-Topic-Id`), in the first frame of each run.
const TOPIC_ID_KEY: &str = "topic_id";
/// Frame metadata of `jelly subscribe`'s Jelly output: the topic's name, beside its id.
const TOPIC_KEY: &str = "topic";

/// Reads the file `path` that `--append` continues: a Jelly file's options and last
/// offset; a text file is checked to end with a line break. An uncompressed Jelly file
/// whose last frame was cut off mid-write (the command killed) is cut back to its last
/// whole frame, with a note; anything else unreadable is an error, the file untouched.
fn existing_output(path: &str, format: SubFormat, quiet: bool) -> CliResult<Existing> {
    let name = crate::io::display_name(path, false);
    match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Existing::default()),
        Err(e) => return Err(CliError::io(&name, &e)),
        Ok(m) if m.len() == 0 => return Ok(Existing::default()),
        Ok(_) => {}
    }
    let input = crate::io::open_input(path)?;
    let compressed = input.compression != crate::io::Compression::None;
    let cannot = |what: String| {
        CliError::usage(format!(
            "cannot append to {name}: {what}; it is left as it is (write to another file, \
             or repair it)"
        ))
    };
    if format != SubFormat::Jelly {
        let mut reader = input.reader;
        let mut last = None;
        loop {
            let buf = reader
                .fill_buf()
                .map_err(|e| cannot(format!("it cannot be read: {e}")))?;
            let Some(&b) = buf.last() else { break };
            last = Some(b);
            let n = buf.len();
            reader.consume(n);
        }
        return match last {
            None => Ok(Existing::default()),
            Some(b'\n') => Ok(Existing {
                non_empty: true,
                ..Existing::default()
            }),
            Some(_) => Err(cannot(
                "it does not end with a line break, so its last item looks cut off \
                 mid-write"
                    .into(),
            )),
        };
    }
    let limits = crate::limits::decoder_options();
    let mut frames = jelly::FrameReader::new(
        input.reader,
        jelly::Delimiting::Delimited,
        limits.max_frame_bytes,
    );
    let mut found = Existing {
        non_empty: true,
        ..Existing::default()
    };
    let mut whole_end = 0u64;
    loop {
        let frame = match frames.next_frame() {
            Ok(Some(f)) => f,
            Ok(None) => break,
            Err(e)
                if !compressed
                    && matches!(e.kind, jelly::DecodeErrorKind::TruncatedFrame { .. }) =>
            {
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(path)
                    .and_then(|f| f.set_len(whole_end))
                    .map_err(|io| CliError::io(&name, &io))?;
                if !quiet {
                    eprintln!(
                        "jelly subscribe: {name} ended inside frame {} ({e}); cut back to \
                         byte {whole_end}, the end of its last whole frame",
                        e.frame
                    );
                }
                break;
            }
            Err(e) => {
                return Err(cannot(format!(
                    "frame {} (byte {}): {}",
                    e.frame,
                    e.offset.unwrap_or(whole_end),
                    e.kind
                )));
            }
        };
        let at = |what: String| {
            cannot(format!(
                "frame {} (byte {}): {what}",
                frame.index, frame.offset
            ))
        };
        if found.options.is_none() {
            let mut dec = Decoder::new(limits.clone());
            let mut cur = dec.frame(frame.bytes);
            while let Some(ev) = cur.next_event().map_err(|e| at(e.to_string()))? {
                if let Event::Options(o) = ev {
                    found.options = Some(o.clone());
                    break;
                }
            }
            if found.options.is_none() {
                return Err(at("the stream does not start with its options row".into()));
            }
        }
        let meta = jelly::frame_metadata(frame.bytes).map_err(|e| at(e.to_string()))?;
        if let Some((_, v)) = meta.iter().find(|(k, _)| *k == TOPIC_ID_KEY) {
            found.topic_id = Some(String::from_utf8_lossy(v).into_owned());
        }
        if let Some((_, v)) = meta.iter().find(|(k, _)| *k == TOPIC_KEY) {
            found.topic = Some(String::from_utf8_lossy(v).into_owned());
        }
        if let Some((_, v)) = meta.iter().find(|(k, _)| *k == "offset") {
            let offset = std::str::from_utf8(v)
                .ok()
                .and_then(|v| v.parse::<u64>().ok())
                .ok_or_else(|| at("its `offset` metadata is not a number".into()))?;
            found.last_offset = Some(offset);
        }
        whole_end = frame.offset + frame.bytes.len() as u64;
    }
    Ok(found)
}

/// Locks the file `path` (made if missing) for this run's appends: an exclusive `flock`,
/// released when the command ends, however it ends.
fn lock_for_append(path: &str) -> CliResult<std::fs::File> {
    let name = crate::io::display_name(path, false);
    if std::fs::metadata(path).is_ok_and(|m| m.is_dir()) {
        return Err(CliError::usage(format!("{name}: is a directory")));
    }
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .append(true)
        .open(path)
        .map_err(|e| CliError::io(&name, &e))?;
    match f.try_lock() {
        Ok(()) => Ok(f),
        Err(std::fs::TryLockError::WouldBlock) => Err(CliError::usage(format!(
            "{name}: another command is appending to it (it holds the file's lock); one \
             subscriber per file"
        ))),
        Err(std::fs::TryLockError::Error(e)) => Err(CliError::io(&name, &e)),
    }
}

/// Splits one delimited frame off the front of `buf`, if it is complete.
fn split_frame(buf: &mut Vec<u8>, max: u64) -> Result<Option<Vec<u8>>, CliError> {
    let (mut len, mut shift, mut i) = (0u64, 0, 0);
    loop {
        let Some(&b) = buf.get(i) else {
            return Ok(None);
        };
        if shift > 63 {
            return Err(CliError::invalid(
                "bad frame from the server: a frame length longer than 10 bytes",
            ));
        }
        len |= u64::from(b & 0x7f) << shift;
        i += 1;
        if b < 0x80 {
            break;
        }
        shift += 7;
    }
    // Refused from its length prefix: the frame is never buffered.
    if len > max {
        return Err(CliError::invalid(format!(
            "bad frame from the server: a frame of {len} bytes, over the limit of {max} \
             (--max-frame-size)"
        )));
    }
    let Some(end) = usize::try_from(len).ok().and_then(|l| i.checked_add(l)) else {
        return Err(CliError::invalid(format!(
            "bad frame from the server: a frame of {len} bytes cannot be held"
        )));
    };
    if buf.len() < end {
        return Ok(None);
    }
    let frame = buf[i..end].to_vec();
    buf.drain(..end);
    Ok(Some(frame))
}

/// How one connection ended.
enum Ended {
    /// --max-items reached.
    Done,
    /// The body ended cleanly.
    BodyEnd,
    /// The connection broke.
    Broken(String),
    /// The topic does not exist (yet); the server's message.
    NoTopic(String),
}

struct State {
    next: Option<u64>,
    written: u64,
    /// The id of the topic the items came from (`X-Jelly-Topic-Id`): sent back when
    /// resuming, so that a topic deleted and created again under the same name (whose
    /// offsets started over) is refused by the server instead of read from `next`.
    topic_id: Option<String>,
}

async fn connection(
    client: &reqwest::Client,
    a: &SubscribeArgs,
    st: &mut State,
    sink: &mut Sink,
    connected: &mut Instant,
) -> CliResult<Ended> {
    let from = st.next.map_or_else(
        || a.from.clone().unwrap_or_else(|| "earliest".into()),
        |n| n.to_string(),
    );
    let mut url = format!(
        "{}?from={}&format=jelly",
        items_url(&a.server, &a.topic),
        percent_encode(&from)
    );
    if a.no_follow {
        url.push_str("&follow=false");
    }
    if let Some(id) = &st.topic_id {
        url.push_str("&topic_id=");
        url.push_str(&percent_encode(id));
    }
    let mut resp = match client.get(&url).send().await {
        Ok(r) => r,
        // A certificate that fails verification will fail again: exit, as publish does.
        Err(e) if jelly_server::tls::is_certificate_error(&e) => {
            return Err(CliError::usage(format!(
                "cannot reach {}: {}{}",
                a.server,
                crate::server_client::describe(&e),
                if a.cacert.is_some() {
                    " (the certificate is not signed by the --cacert authorities)"
                } else {
                    " (a private CA needs --cacert)"
                }
            )));
        }
        Err(e) => {
            return Ok(Ended::Broken(format!(
                "cannot reach {}: {}",
                a.server,
                crate::server_client::describe(&e)
            )));
        }
    };
    let status = resp.status();
    if !status.is_success() {
        let text = resp.text().await.unwrap_or_default();
        let json = serde_json::from_str::<serde_json::Value>(&text).ok();
        // A topic is created by its first publish: a follower started first waits.
        let names_topic = json.as_ref().is_some_and(|v| v["topic"].is_string());
        let msg = json
            .and_then(|v| v["error"].as_str().map(str::to_string))
            .unwrap_or(text);
        if status.is_server_error() {
            return Ok(Ended::Broken(format!("server error {status}: {msg}")));
        }
        if status == reqwest::StatusCode::NOT_FOUND && names_topic && !a.no_follow {
            return Ok(Ended::NoTopic(msg));
        }
        return Err(CliError::invalid(format!(
            "topic `{}` on {}: {status}: {msg}",
            a.topic, a.server
        )));
    }
    // A 200 that is not a Jelly stream (a proxy's page, a wrong URL) is not retried as
    // if the connection had broken.
    let content_type = resp
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if !content_type.starts_with("application/x-jelly-rdf") {
        return Err(CliError::invalid(format!(
            "{}: the answer is not a Jelly stream (content-type `{content_type}`)",
            a.server
        )));
    }
    *connected = Instant::now();
    if let Some(id) = resp
        .headers()
        .get("x-jelly-topic-id")
        .and_then(|v| v.to_str().ok())
    {
        st.topic_id = Some(id.to_string());
    }
    // Where this stream starts: a `from` such as `latest` is resolved once, so that a
    // reconnection before the first item goes on from there, not from a later
    // `latest` (items published in between would be skipped).
    if st.next.is_none()
        && let Some(start) = resp
            .headers()
            .get("x-jelly-start-offset")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok())
    {
        st.next = Some(start);
    }
    let limits = crate::limits::decoder_options();
    let max_frame = limits.max_frame_bytes;
    let mut dec = Decoder::new(limits);
    let mut buf = Vec::new();
    loop {
        while let Some(frame) = split_frame(&mut buf, max_frame)? {
            let mut cur = dec.frame(&frame);
            let meta: Vec<(String, Vec<u8>)> = cur
                .metadata()
                .map_err(|e| CliError::invalid(format!("bad frame from the server: {e}")))?
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_vec()))
                .collect();
            let mut statements = Vec::new();
            while let Some(ev) = cur
                .next_event()
                .map_err(|e| CliError::invalid(format!("bad frame from the server: {e}")))?
            {
                if let Event::Statement(s) = ev {
                    statements.push(s.to_owned());
                }
            }
            let offset = meta
                .iter()
                .find(|(k, _)| k == "offset")
                .and_then(|(_, v)| std::str::from_utf8(v).ok()?.parse::<u64>().ok())
                .ok_or_else(|| CliError::invalid("a frame without an `offset` in its metadata"))?;
            sink.item(st.topic_id.as_deref(), dec.options(), &meta, &statements)?;
            st.next = Some(offset + 1);
            st.written += 1;
            *connected = Instant::now();
            if a.max_items.is_some_and(|m| st.written >= m) {
                return Ok(Ended::Done);
            }
        }
        match resp.chunk().await {
            Ok(Some(c)) => buf.extend_from_slice(&c),
            Ok(None) if buf.is_empty() => return Ok(Ended::BodyEnd),
            Ok(None) => return Ok(Ended::Broken("the stream ended inside a frame".into())),
            // reqwest says only "error decoding response body" for a body cut short
            // (as the server cuts a subscriber it stops serving): say what happened,
            // and its cause.
            Err(e) => {
                let cause = std::error::Error::source(&e)
                    .map_or_else(|| e.to_string(), ToString::to_string);
                return Ok(Ended::Broken(format!("the stream was cut: {cause}")));
            }
        }
    }
}

/// The output format: `--format`, else the one the `--to` file's name says (a `.jelly`
/// file gets Jelly, `.ttl` Turtle, …), else N-Quads. A name that says RDF/XML or
/// JSON-LD, which a subscription cannot write, is refused rather than filled with
/// another syntax.
pub fn output_format(given: Option<SubFormat>, to: Option<&str>) -> CliResult<SubFormat> {
    if let Some(f) = given {
        return Ok(f);
    }
    let Some(path) = to else {
        return Ok(SubFormat::Nq);
    };
    if crate::format::is_jelly_path(path) {
        return Ok(SubFormat::Jelly);
    }
    Ok(match crate::format::Format::from_path(path) {
        None | Some(crate::format::Format::Nq) => SubFormat::Nq,
        Some(crate::format::Format::Nt) => SubFormat::Nt,
        Some(crate::format::Format::Ttl) => SubFormat::Ttl,
        Some(crate::format::Format::Trig) => SubFormat::Trig,
        Some(other) => {
            return Err(CliError::usage(format!(
                "`{path}` names {other:?}, which subscribe does not write: give --format \
                 (jelly, nq, nt, trig, ttl) to write one of those there anyway"
            )));
        }
    })
}

pub fn run(a: &SubscribeArgs, quiet: bool) -> CliResult {
    crate::server_client::check_topic(&a.topic)?;
    let format = output_format(a.format, a.to.as_deref())?;
    let mut existing = Existing::default();
    // Held while this run appends: a second run on the same file would continue from
    // the same last item and with the same table state, and the file would not decode.
    let mut lock = None;
    let out = match a.to.as_deref() {
        Some("-") if a.append => {
            return Err(CliError::usage(
                "--append adds to a file: give one with --to (stdout cannot be appended to)",
            ));
        }
        Some(path) if a.append => {
            lock = Some(lock_for_append(path)?);
            existing = existing_output(path, format, quiet)?;
            if existing.non_empty && format != SubFormat::Jelly && a.from.is_none() {
                return Err(CliError::usage(format!(
                    "--append to {} file that is not empty needs --from: a text \
                     file does not record the offsets of its items (a Jelly file does)",
                    match format {
                        SubFormat::Nq => "an N-Quads",
                        SubFormat::Nt => "an N-Triples",
                        SubFormat::Trig => "a TriG",
                        SubFormat::Ttl => "a Turtle",
                        SubFormat::Jelly => "a Jelly",
                    }
                )));
            }
            if let Some(held) = existing.topic.as_deref().filter(|t| *t != a.topic) {
                return Err(CliError::usage(format!(
                    "cannot append to {path}: it holds items of topic `{held}`, not `{}`",
                    a.topic
                )));
            }
            if existing.options.is_some() && existing.last_offset.is_none() && a.from.is_none() {
                return Err(CliError::usage(format!(
                    "--append: the frames of {path} carry no `offset` metadata (it was not \
                     written by jelly subscribe), so where to go on is unknown: give --from"
                )));
            }
            OutSlot::Lazy {
                path: path.to_string(),
                append: true,
            }
        }
        Some(path) if path != "-" => {
            crate::io::check_output_writable(path)?;
            OutSlot::Lazy {
                path: path.to_string(),
                append: false,
            }
        }
        to => OutSlot::Open(Box::new(open_output_live(to)?)),
    };
    let mut sink = Sink {
        format,
        out,
        enc: None,
        buf: Vec::new(),
        continues: existing.options.clone().map(|o| {
            let name = crate::io::display_name(a.to.as_deref().unwrap_or("-"), false);
            (name, o)
        }),
        topic: a.topic.clone(),
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::io("tokio runtime", &e))?;
    if a.busy_poll {
        rt.spawn(jelly_server::runtime::poll_without_sleeping());
    }
    let client = crate::server_client::client(
        crate::server_client::token(a.token.as_deref()).as_deref(),
        a.cacert.as_deref(),
    )?;
    // The topic the file's items came from: a topic of the same name created since (its
    // offsets start over) is refused by the server, and this run ends with an error.
    let mut st = State {
        next: None,
        written: 0,
        topic_id: existing.topic_id.clone(),
    };
    if let Some(last) = existing.last_offset {
        match &a.from {
            None => st.next = Some(last.saturating_add(1)),
            Some(from) if !quiet => eprintln!(
                "jelly subscribe: the file ends with item {last}; appending from --from {from} as asked"
            ),
            Some(_) => {}
        }
    }
    let mut interrupted = false;
    let result = rt.block_on(async {
        // Ctrl-C or SIGTERM is the way to stop following: the items written so far
        // stay, and the output is finished (a compressed file gets its trailer).
        let stop = jelly_server::server::interrupt_or_terminate();
        let follow = follow_topic(a, quiet, &client, &mut st, &mut sink);
        tokio::select! {
            r = follow => r,
            () = stop => {
                interrupted = true;
                Ok(())
            }
        }
    });
    // Interrupted before the first item (waiting for a topic, or for a server that
    // is down): nothing to replace the file with.
    let finish = sink.out.finish(result.is_ok() && !interrupted);
    drop(lock);
    result.and(finish)?;
    if !quiet {
        let how = if interrupted { "interrupted; " } else { "" };
        let items = if st.written == 1 { "item" } else { "items" };
        eprintln!("jelly subscribe: {how}{} {items}", st.written);
    }
    Ok(())
}

/// Follows the topic until `--max-items`, the end of a `--no-follow` replay, or an
/// error, reconnecting after a broken connection.
async fn follow_topic(
    a: &SubscribeArgs,
    quiet: bool,
    client: &reqwest::Client,
    st: &mut State,
    sink: &mut Sink,
) -> CliResult {
    {
        let mut last_ok = Instant::now();
        let mut backoff = Duration::from_millis(250);
        let mut waiting_for_topic = false;
        loop {
            if a.max_items == Some(0) {
                return Ok(());
            }
            let connected_before = last_ok;
            match connection(client, a, st, sink, &mut last_ok).await? {
                Ended::Done => return Ok(()),
                Ended::BodyEnd if a.no_follow => return Ok(()),
                Ended::BodyEnd => {
                    if !quiet {
                        eprintln!("jelly subscribe: the server closed the stream; reconnecting");
                    }
                    // The connection was good until now: the retry budget starts here,
                    // however long the topic was quiet.
                    last_ok = Instant::now();
                }
                Ended::NoTopic(why) if st.topic_id.is_some() => {
                    // It was there and is gone: it was deleted. Resuming in a topic
                    // created again under its name, whose offsets start over at 0,
                    // would skip or mix items.
                    let when = match st.next {
                        Some(n) if st.written > 0 => {
                            format!("after its item {}", n.saturating_sub(1))
                        }
                        _ => "before any item arrived".to_string(),
                    };
                    return Err(CliError::invalid(format!(
                        "topic `{}` is gone {when} (deleted, or lost in a restart of a server with an in-memory log); not resuming (the server says: {why})",
                        a.topic
                    )));
                }
                Ended::NoTopic(why) => {
                    if !quiet && !waiting_for_topic {
                        eprintln!(
                            "jelly subscribe: {why}; waiting for its first publish (Ctrl-C to stop)"
                        );
                    }
                    waiting_for_topic = true;
                    last_ok = Instant::now();
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
                Ended::Broken(why) => {
                    if last_ok != connected_before {
                        // The server answered this time (and maybe sent items): this
                        // is a new outage, whose back-off starts over rather than
                        // going on doubling from the earlier one's.
                        backoff = Duration::from_millis(250);
                    }
                    // The last wait is cut to what is left of the budget, so the last
                    // attempt comes at its end, not a whole back-off after it.
                    let budget = Duration::from_secs(a.retry_secs);
                    let left = budget.saturating_sub(last_ok.elapsed());
                    if left.is_zero() {
                        return Err(CliError::usage(format!(
                            "{why} (gave up: no success within --retry-secs {} s)",
                            a.retry_secs
                        )));
                    }
                    let wait = backoff.min(left);
                    if !quiet {
                        // Whole milliseconds: `244.848744ms` tells a reader nothing more.
                        eprintln!("jelly subscribe: {why}; retrying in {}ms", wait.as_millis());
                    }
                    tokio::time::sleep(wait).await;
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                    continue;
                }
            }
            backoff = Duration::from_millis(250);
            tokio::time::sleep(backoff).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--from` is checked here as the server reads it: digits only, so `+5` (which
    /// Rust's number parser takes) is a usage error, not the server's 400.
    #[test]
    fn start_positions_are_checked_as_the_server_reads_them() {
        for good in [
            "earliest",
            "latest",
            "0",
            "17",
            "ts:1700000000000",
            "last:5",
        ] {
            assert_eq!(start_position(good).as_deref(), Ok(good), "{good}");
        }
        for bad in [
            "+5", "ts:+5", "last:+5", "-1", " 5", "5 ", "", "last:", "0x1", "later",
        ] {
            assert!(start_position(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_output_format_follows_the_file_name_unless_given() {
        let f = |given, to| output_format(given, to).unwrap();
        assert_eq!(f(None, None), SubFormat::Nq);
        assert_eq!(f(None, Some("live.jelly")), SubFormat::Jelly);
        assert_eq!(f(None, Some("live.jelly.gz")), SubFormat::Jelly);
        assert_eq!(f(None, Some("out.ttl")), SubFormat::Ttl);
        assert_eq!(f(None, Some("out.trig")), SubFormat::Trig);
        assert_eq!(f(None, Some("out.nt")), SubFormat::Nt);
        assert_eq!(f(None, Some("out.log")), SubFormat::Nq);
        assert_eq!(f(Some(SubFormat::Nq), Some("x.jelly")), SubFormat::Nq);
        assert!(output_format(None, Some("out.rdf")).is_err());
    }
}
