//! `jelly publish`: send RDF files or Jelly streams to a topic of a running server.

use clap::Args;

use crate::error::{CliError, CliResult};
use crate::format::{Format, is_jelly_path, unknown_format};
use crate::io::{Compression, open_raw};

pub const PUBLISH_HELP: &str = "\
Examples:
  jelly publish weather obs.jelly
  jelly publish sensors a.nq b.ttl --source station-7 --header unit=celsius
  jelly publish graphs data.trig --split-graph
  cat data.nq | jelly publish sensors -
  jelly rdf to-jelly data.ttl --frame-per graph | jelly publish sensors - --jelly
  producer | jelly publish sensors - --jelly --stream

A Jelly stream becomes one item per frame; an RDF file one item (or one per named
graph with --split-graph). Each file is one request: the server checks all of it and
appends nothing if any of it is refused. With --stream (Jelly input only) the input is
sent as it is read, as one long-lived streaming request: the server appends items as
their frames arrive, and a bad frame ends it with the items before it kept. Stopped
by Ctrl-C or SIGTERM, it ends the request after the frame in flight (waiting up to 2 s
for its rest), prints the server's answer with the offsets of what was appended, and
exits 130 or 143; a second Ctrl-C exits at once. Inputs are
sent as they are read, in bounded memory; gzip and zstd files (found by their first
bytes) are sent compressed, with their Content-Encoding, and the server inflates them.
The offsets the server gave are printed as JSON, one line per file. The topic is created on first publish if it does not exist.

Exit codes: 0 published, 1 refused by the server (bad data: a 4xx answer), 2 usage
error, I/O error, the server cannot be reached or cannot take it now (a 5xx answer:
unavailable, out of topics or storage).";

#[derive(Debug, Args)]
pub struct PublishArgs {
    /// The topic.
    pub topic: String,
    /// Input files (`-` or none for stdin). `.jelly` files are sent as Jelly.
    #[arg(value_name = "FILE")]
    pub inputs: Vec<String>,
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
    /// Format of RDF input (default: from the extension; N-Quads for stdin).
    #[arg(long = "in-format", value_enum, value_name = "FORMAT")]
    pub in_format: Option<Format>,
    /// The input is a Jelly stream (for stdin; `.jelly` files are detected).
    #[arg(long, conflicts_with = "in_format")]
    pub jelly: bool,
    /// One item per named graph (RDF input; a Jelly input is one item per frame).
    #[arg(long = "split-graph")]
    pub split_graph: bool,
    /// Streaming publish (Jelly input): send the input as it is read; the server
    /// appends items as frames arrive (for long-lived producers on stdin).
    #[arg(long, conflicts_with = "split_graph")]
    pub stream: bool,
    /// Base IRI for relative IRIs in Turtle and TriG.
    #[arg(long = "base-iri", value_name = "IRI")]
    pub base_iri: Option<String>,
    /// Source id stored with each item (frame metadata `source`).
    #[arg(long, value_name = "ID")]
    pub source: Option<String>,
    /// A header stored with each item (frame metadata `h:NAME`); repeatable.
    #[arg(long = "header", value_name = "NAME=VALUE")]
    pub headers: Vec<String>,
}

fn content_type(path: &str, a: &PublishArgs) -> CliResult<&'static str> {
    if a.jelly || (path != "-" && is_jelly_path(path) && a.in_format.is_none()) {
        return Ok("application/x-jelly-rdf");
    }
    let f = match a.in_format {
        Some(f) => f,
        None if path == "-" => Format::Nq,
        None => {
            Format::from_path(path).ok_or_else(|| unknown_format(path, "--in-format or --jelly"))?
        }
    };
    Ok(match f {
        Format::Nq => "application/n-quads",
        Format::Nt => "application/n-triples",
        // N3 documents that are RDF are written in its Turtle subset, which the server
        // reads; N3's own syntax (formulas, rules) is not RDF and gets the server's
        // Turtle error with its line.
        Format::Ttl | Format::N3 => "text/turtle",
        Format::Trig => "application/trig",
        Format::Rdfxml => "application/rdf+xml",
        Format::Jsonld => "application/ld+json",
    })
}

/// The topic URL with the query for these arguments.
pub fn items_url(server: &str, topic: &str) -> String {
    format!("{}/topics/{}/items", server.trim_end_matches('/'), topic)
}

/// Percent-encodes a query value (everything but unreserved characters).
pub fn percent_encode(v: &str) -> String {
    let mut out = String::new();
    for b in v.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

pub fn run(a: &PublishArgs, quiet: bool) -> CliResult {
    crate::server_client::check_topic(&a.topic)?;
    let inputs = if a.inputs.is_empty() {
        vec!["-".to_string()]
    } else {
        a.inputs.clone()
    };
    let mut headers = Vec::new();
    let mut names = std::collections::HashSet::new();
    for h in &a.headers {
        let (k, v) = h
            .split_once('=')
            .ok_or_else(|| CliError::usage(format!("--header `{h}`: use NAME=VALUE")))?;
        if k.is_empty() {
            return Err(CliError::usage(format!(
                "--header `{h}`: the name before `=` is empty"
            )));
        }
        // Header names are case-insensitive: the server would refuse the second.
        if !names.insert(k.to_ascii_lowercase()) {
            return Err(CliError::usage(format!(
                "--header {k} is given more than once; give each name once"
            )));
        }
        headers.push((format!("x-jelly-header-{k}"), v.to_string()));
    }
    // Every file can be opened and its format told before the first is sent: a
    // misspelled last name would otherwise leave the topic with the files before it.
    let mut content_types = Vec::with_capacity(inputs.len());
    for path in &inputs {
        let ct = content_type(path, a)?;
        if a.stream && ct != "application/x-jelly-rdf" {
            return Err(CliError::usage(format!(
                "{path}: --stream takes Jelly input (use --jelly or a .jelly file)"
            )));
        }
        content_types.push(ct);
        if path == "-" {
            continue;
        }
        let name = crate::io::display_name(path, false);
        if std::fs::metadata(path).is_ok_and(|m| m.is_dir()) {
            return Err(CliError::usage(format!("{name}: is a directory")));
        }
        std::fs::File::open(path).map_err(|e| CliError::io(&name, &e))?;
    }
    let mut query = Vec::new();
    if let Some(b) = &a.base_iri {
        query.push(("base", b.clone()));
    }
    if a.stream {
        query.push(("stream", "true".to_string()));
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::io("tokio runtime", &e))?;
    let client = crate::server_client::write_client(
        crate::server_client::token(a.token.as_deref()).as_deref(),
        a.cacert.as_deref(),
    )?;
    let mut url = items_url(&a.server, &a.topic);
    for (i, (k, v)) in query.iter().enumerate() {
        url.push(if i == 0 { '?' } else { '&' });
        url.push_str(k);
        url.push('=');
        url.push_str(&percent_encode(v));
    }
    // `--split-graph` applies to RDF files: a Jelly file is one item per frame already
    // (and the server refuses `split=graph` on one), so a mix of both can be published.
    let split_url = a.split_graph.then(|| {
        let sep = if query.is_empty() { '?' } else { '&' };
        format!("{url}{sep}split=graph")
    });
    for (done, (path, ct)) in inputs.iter().zip(content_types).enumerate() {
        // When a later file fails, the earlier ones are already in the topic: say so.
        let state = |mut e: CliError| {
            if inputs.len() > 1 {
                e.message.push_str(&format!(
                    " ({done} earlier file(s) published; {} not published)",
                    inputs.len() - done
                ));
            }
            e
        };
        // Sent as stored, in bounded memory: a compressed input goes with its
        // Content-Encoding and the server inflates it (and counts the inflated bytes
        // against its limits).
        let raw = open_raw(path).map_err(state)?;
        let name = raw.name.clone();
        let coding = match raw.compression {
            Compression::None => None,
            Compression::Gzip => Some("gzip"),
            Compression::Zstd => Some("zstd"),
        };
        // A streaming publish takes the first Ctrl-C itself: it ends the body after
        // the frame in flight and prints the server's answer.
        let interrupt = if a.stream {
            crate::interrupt::defer_first_signal()
        } else {
            None
        };
        let body = match &interrupt {
            Some(rx) => crate::stream_body::forward_until(raw, rx.clone()),
            None => crate::stream_body::forward(raw),
        };
        let target = match &split_url {
            Some(u) if ct != "application/x-jelly-rdf" => u,
            _ => &url,
        };
        let mut req = client.post(target).header("content-type", ct).body(body);
        if let Some(c) = coding {
            req = req.header("content-encoding", c);
        }
        if let Some(s) = &a.source {
            req = req.header("x-jelly-source", s);
        }
        for (k, v) in &headers {
            req = req.header(k, v);
        }
        let (status, text) = rt
            .block_on(crate::server_client::send(req, &a.server))
            .map_err(|mut e| {
                if a.stream && e.message.contains("broke off") {
                    // The server appends a streaming request's items as their frames
                    // arrive: some may be in the topic.
                    e.message.push_str(
                        " (items of the frames sent before may have been appended; \
                         `jelly subscribe --from last:N` shows the newest)",
                    );
                }
                // Interrupted, the command still exits as the signal would.
                if let Some(code) = interrupt.as_ref().and_then(|rx| *rx.borrow()) {
                    e.code = code;
                    e.message.push_str(" (interrupted)");
                }
                state(e)
            })?;
        if let Some(code) = interrupt.as_ref().and_then(|rx| *rx.borrow()) {
            return Err(interrupted(&name, &a.topic, code, status, &text));
        }
        if !status.is_success() {
            let mut e = crate::server_client::refused(&name, status, &text);
            // Standard input has no name to tell its syntax by.
            if path == "-"
                && a.in_format.is_none()
                && !a.jelly
                && status == reqwest::StatusCode::BAD_REQUEST
                && text.contains("syntax error")
            {
                e.message.push_str(
                    " (standard input is sent as N-Quads unless --in-format names its \
                     syntax, or --jelly)",
                );
            }
            return Err(state(e));
        }
        // Published: a failure to say so is reported (naming what stays unpublished),
        // not a panic.
        crate::server_client::print_line(text.trim())?;
        if !quiet {
            let n = serde_json::from_str::<serde_json::Value>(&text)
                .ok()
                .and_then(|v| match v["offsets"].as_array() {
                    Some(o) => Some(o.len() as u64),
                    None => v["items"].as_u64(),
                })
                .unwrap_or(0);
            let items = if n == 1 { "item" } else { "items" };
            eprintln!("{name}: {n} {items} published to `{}`", a.topic);
        }
    }
    Ok(())
}

/// The outcome of a streaming publish stopped by a signal (exit code `code`): the
/// server's answer to the body ended at a frame boundary, its offsets printed.
fn interrupted(
    name: &str,
    topic: &str,
    code: u8,
    status: reqwest::StatusCode,
    text: &str,
) -> CliError {
    let answer = serde_json::from_str::<serde_json::Value>(text).ok();
    // A refusal after some frames (a bad frame in flight) still names what was kept.
    let items = answer
        .as_ref()
        .and_then(|v| v["items"].as_u64().or(v["items_accepted"].as_u64()))
        .unwrap_or(0);
    let what = if items == 1 { "item" } else { "items" };
    let mut message = format!("{name}: interrupted; {items} {what} published to `{topic}`");
    if status.is_success() {
        // The usual answer line, for scripts; a failed write is said instead.
        if let Err(e) = crate::server_client::print_line(text.trim()) {
            return e;
        }
    } else if items > 0 || status != reqwest::StatusCode::BAD_REQUEST {
        let ranges = answer
            .as_ref()
            .map(|v| v["ranges"].to_string())
            .filter(|r| r != "null")
            .map(|r| format!(" (offsets {r})"))
            .unwrap_or_default();
        message.push_str(&format!(
            "{ranges}; the server's answer ({status}): {}",
            crate::server_client::refusal_message(text)
        ));
    }
    CliError {
        code,
        message,
        broken_pipe: false,
    }
}
