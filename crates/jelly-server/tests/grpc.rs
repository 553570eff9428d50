//! The gRPC `RdfStreamService` on real loopback sockets, with a real tonic client
//! (HTTP/2 cleartext, prior knowledge) that uses the same custom codec as the server.

mod support;

use std::time::Duration;

use axum::http::uri::PathAndQuery;
use bytes::Bytes;
use jelly::{Decoder, Encoder, PhysicalType, Statement, StreamOptions, Term};
use jelly_server::grpc::codec::JellyCodec;
use jelly_server::grpc::messages::{Frame, Received, Subscribe};
use jelly_server::grpc::{PUBLISH_PATH, SUBSCRIBE_PATH};
use jelly_server::topic::{Physical, TopicOptions};
use jelly_server::{Server, ServerConfig};
use support::{DecodedFrame as Got, iri};
use tonic::client::Grpc;
use tonic::transport::Channel;
use tonic::{Code, Request, Response, Status, Streaming};

/// Guard against a hung test (never asserted on).
const LIMIT: Duration = Duration::from_secs(30);

async fn start() -> Server {
    start_with(|_| {}).await
}

async fn start_with(f: impl FnOnce(&mut ServerConfig)) -> Server {
    let mut c = ServerConfig::ephemeral();
    f(&mut c);
    Server::start(c).await.unwrap()
}

async fn channel(s: &Server) -> Channel {
    support::grpc_channel(&s.url()).await
}

fn datasets() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/datasets")
}

/// The first `n` statements of a shared N-Quads dataset.
fn dataset_statements(rel: &str, n: usize) -> Vec<Statement> {
    let text = std::fs::read_to_string(datasets().join(rel)).unwrap();
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if let Some(st) = jelly::nquads::parse_line(line, i + 1).unwrap() {
            out.push(st);
            if out.len() == n {
                break;
            }
        }
    }
    assert_eq!(out.len(), n);
    out
}

fn quad(i: usize, j: usize) -> Statement {
    Statement {
        subject: iri(&format!("http://ex.org/s{i}")),
        predicate: iri("http://ex.org/p"),
        object: iri(&format!("http://ex.org/o{i}_{j}")),
        graph: Some(iri(&format!("http://ex.org/g{i}"))),
    }
}

fn triple(i: usize) -> Statement {
    Statement {
        graph: None,
        ..quad(i, 0)
    }
}

/// `n` groups of two quads each.
fn quad_groups(n: usize, start: usize) -> Vec<Vec<Statement>> {
    (start..start + n)
        .map(|i| vec![quad(i, 0), quad(i, 1)])
        .collect()
}

/// A publisher's stream: one non-delimited frame per group, tables carried over (so
/// later frames depend on earlier ones), the options row in the first.
fn frames(groups: &[Vec<Statement>], opts: StreamOptions) -> Vec<Bytes> {
    let mut enc = Encoder::new(opts).unwrap();
    groups
        .iter()
        .map(|g| {
            for st in g {
                enc.add(st.as_ref()).unwrap();
            }
            Bytes::from(enc.finish_frame())
        })
        .collect()
}

fn quads_opts() -> StreamOptions {
    StreamOptions::small().with_physical_type(PhysicalType::Quads)
}

async fn publish_md(
    ch: &Channel,
    md: &[(&'static str, &str)],
    frames: Vec<Bytes>,
) -> Result<Response<Received>, Status> {
    let mut g = Grpc::new(ch.clone());
    g.ready().await.unwrap();
    let mut r = Request::new(futures_util::stream::iter(frames.into_iter().map(Frame)));
    for (k, v) in md {
        r.metadata_mut().insert(*k, v.parse().unwrap());
    }
    g.client_streaming(
        r,
        PathAndQuery::from_static(PUBLISH_PATH),
        JellyCodec::<Frame, Received>::new(),
    )
    .await
}

async fn publish(
    ch: &Channel,
    topic: &str,
    frames: Vec<Bytes>,
) -> Result<Response<Received>, Status> {
    publish_md(ch, &[("x-jelly-topic", topic)], frames).await
}

fn md_u64<T>(r: &Response<T>, key: &str) -> u64 {
    r.metadata()
        .get(key)
        .unwrap_or_else(|| panic!("no {key}"))
        .to_str()
        .unwrap()
        .parse()
        .unwrap()
}

async fn subscribe(
    ch: &Channel,
    topic: &str,
    requested: Option<StreamOptions>,
    from: Option<&str>,
) -> Result<Streaming<Frame>, Status> {
    let mut g = Grpc::new(ch.clone());
    g.ready().await.unwrap();
    let mut r = Request::new(Subscribe {
        topic: topic.to_string(),
        requested_options: requested,
    });
    if let Some(f) = from {
        r.metadata_mut().insert("x-jelly-from", f.parse().unwrap());
    }
    g.server_streaming(
        r,
        PathAndQuery::from_static(SUBSCRIBE_PATH),
        JellyCodec::<Subscribe, Frame>::new(),
    )
    .await
    .map(Response::into_inner)
}

/// Decodes a subscription's frames with one decoder (one Jelly stream).
struct Reader {
    stream: Streaming<Frame>,
    dec: Decoder,
}

impl Reader {
    fn new(stream: Streaming<Frame>) -> Reader {
        Reader {
            stream,
            dec: Decoder::default(),
        }
    }

    /// The next frame (fails the test if the stream ends or errs).
    async fn next(&mut self) -> Got {
        let f = tokio::time::timeout(LIMIT, self.stream.message())
            .await
            .expect("no frame in time")
            .expect("stream error")
            .expect("stream ended");
        Got::decode(&mut self.dec, &f.0)
    }

    async fn take(&mut self, n: usize) -> Vec<Got> {
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            v.push(self.next().await);
        }
        v
    }

    /// The status the stream ends with.
    async fn end(&mut self) -> Status {
        match tokio::time::timeout(LIMIT, self.stream.message())
            .await
            .expect("no end in time")
        {
            Err(st) => st,
            Ok(other) => panic!("expected an error status, got {other:?}"),
        }
    }
}

fn flat(got: &[Got]) -> Vec<Statement> {
    got.iter().flat_map(|g| g.statements.clone()).collect()
}

#[tokio::test]
async fn publish_then_subscribe_round_trip() {
    let s = start().await;
    let ch = channel(&s).await;
    let groups = quad_groups(5, 0);
    let r = publish_md(
        &ch,
        &[
            ("x-jelly-topic", "rt"),
            ("x-jelly-source", "sensor-7"),
            ("x-jelly-header-unit", "celsius"),
        ],
        frames(&groups, quads_opts()),
    )
    .await
    .unwrap();
    assert_eq!(md_u64(&r, "x-jelly-items"), 5);
    assert_eq!(md_u64(&r, "x-jelly-first-offset"), 0);
    assert_eq!(md_u64(&r, "x-jelly-last-offset"), 4);

    let mut rd = Reader::new(subscribe(&ch, "rt", None, None).await.unwrap());
    let got = rd.take(5).await;
    assert_eq!(
        got.iter().map(Got::offset).collect::<Vec<_>>(),
        [0, 1, 2, 3, 4]
    );
    for (g, want) in got.iter().zip(&groups) {
        assert_eq!(&g.statements, want);
        assert_eq!(g.meta["source"], "sensor-7");
        assert_eq!(g.meta["h:unit"], "celsius");
        assert!(g.meta["ts"].parse::<u64>().unwrap() > 0);
    }
    // The topic's own stream options (splice: no request).
    let o = rd.dec.options().unwrap();
    assert_eq!(o.physical_type, PhysicalType::Quads);
    assert_eq!(o.max_name_table_size, 4000);

    // A second publish continues the offsets.
    let r = publish(&ch, "rt", frames(&quad_groups(2, 5), quads_opts()))
        .await
        .unwrap();
    assert_eq!(md_u64(&r, "x-jelly-first-offset"), 5);
    assert_eq!(md_u64(&r, "x-jelly-last-offset"), 6);
    // ...and the live subscription sees the new items.
    let live = rd.take(2).await;
    assert_eq!(live[0].offset(), 5);
    assert_eq!(live[1].statements, quad_groups(2, 5)[1]);

    // The subscription is registered as a grpc subscriber.
    let metrics = support::metrics_text(&reqwest::Client::new(), &s.url()).await;
    assert!(
        metrics.contains("kind=\"grpc\""),
        "no grpc subscriber in:\n{metrics}"
    );
    assert!(metrics.contains("jelly_items_out_total 7"), "{metrics}");
    drop(rd);
    s.shutdown().await.unwrap();
}

/// Publishes the first 600 nanopub quads (many namespaces and datatypes) as 12 frames.
async fn publish_nanopubs(ch: &Channel, topic: &str) -> Vec<Vec<Statement>> {
    let st = dataset_statements("nanopubs-fair-pkd/nanopubs-fair-pkd.nq", 600);
    let groups: Vec<Vec<Statement>> = st.chunks(50).map(<[Statement]>::to_vec).collect();
    let r = publish(
        ch,
        topic,
        frames(
            &groups,
            StreamOptions::big().with_physical_type(PhysicalType::Quads),
        ),
    )
    .await
    .unwrap();
    assert_eq!(md_u64(&r, "x-jelly-items"), 12);
    groups
}

#[tokio::test]
async fn requested_options_splice_and_compact() {
    let s = start().await;
    let ch = channel(&s).await;
    let groups = publish_nanopubs(&ch, "np").await;
    let want: Vec<Statement> = groups.concat();

    // Tables at least the topic's: spliced, the topic's options.
    let big = StreamOptions::with_tables(10_000, 1000, 100).with_physical_type(PhysicalType::Quads);
    let mut rd = Reader::new(subscribe(&ch, "np", Some(big), None).await.unwrap());
    let got = rd.take(12).await;
    assert_eq!(flat(&got), want);
    let o = rd.dec.options().unwrap().clone();
    assert_eq!(
        (
            o.max_name_table_size,
            o.max_prefix_table_size,
            o.max_datatype_table_size
        ),
        (4000, 150, 32)
    );

    // Smaller tables: re-encoded with the client's sizes, still the same statements
    // (tables evict constantly at these sizes), still one item per frame with offsets.
    let small = StreamOptions {
        version: 1,
        ..StreamOptions::with_tables(16, 4, 2).with_physical_type(PhysicalType::Quads)
    };
    let mut rd = Reader::new(
        subscribe(&ch, "np", Some(small.clone()), None)
            .await
            .unwrap(),
    );
    let got = rd.take(12).await;
    assert_eq!(flat(&got), want);
    for (i, (g, grp)) in got.iter().zip(&groups).enumerate() {
        assert_eq!(g.offset(), i as u64);
        assert_eq!(&g.statements, grp);
    }
    let o = rd.dec.options().unwrap().clone();
    assert_eq!(
        (
            o.max_name_table_size,
            o.max_prefix_table_size,
            o.max_datatype_table_size
        ),
        (16, 4, 2)
    );
    assert!(o.is_compatible_with_request(&small), "{o:?} vs {small:?}");

    // Prefix tables of 1 to 3 entries cannot hold a nanopub quad's prefixes: the IRIs
    // are sent whole (names under the empty prefix), not refused.
    for prefixes in [1, 2, 3] {
        let tiny = StreamOptions {
            version: 1,
            ..StreamOptions::with_tables(16, prefixes, 2).with_physical_type(PhysicalType::Quads)
        };
        let mut rd = Reader::new(subscribe(&ch, "np", Some(tiny), None).await.unwrap());
        assert_eq!(flat(&rd.take(12).await), want, "prefix table {prefixes}");
    }
    s.shutdown().await.unwrap();
}

#[tokio::test]
async fn incompatible_requested_options_are_invalid_argument() {
    let s = start().await;
    let ch = channel(&s).await;
    let star = TopicOptions {
        rdf_star: true,
        generalized: true,
        ..TopicOptions::default()
    };
    s.state().topics.create("star", Some(star)).unwrap();
    s.state().topics.create("plain", None).unwrap();
    let q = || StreamOptions::big().with_physical_type(PhysicalType::Quads);
    let cases: Vec<(&str, StreamOptions, &str)> = vec![
        (
            "plain",
            q().with_physical_type(PhysicalType::Triples),
            "physical type",
        ),
        (
            "plain",
            q().with_physical_type(PhysicalType::Graphs),
            "physical type",
        ),
        ("star", q().with_generalized_statements(true), "rdf_star"),
        ("star", q().with_rdf_star(true), "generalized"),
        (
            "plain",
            StreamOptions {
                max_name_table_size: 7,
                ..q()
            },
            "minimum of 8",
        ),
    ];
    for (topic, req, needle) in cases {
        let st = subscribe(&ch, topic, Some(req.clone()), None)
            .await
            .expect_err("must be refused");
        assert_eq!(st.code(), Code::InvalidArgument, "{req:?}: {st:?}");
        assert!(st.message().contains(needle), "{needle}: {}", st.message());
    }
    // Equal-or-false: a star topic is fine when both features are requested, and a
    // plain topic when they are requested but unused.
    let both = q().with_rdf_star(true).with_generalized_statements(true);
    assert!(
        subscribe(&ch, "star", Some(both.clone()), None)
            .await
            .is_ok()
    );
    assert!(subscribe(&ch, "plain", Some(both), None).await.is_ok());
    s.shutdown().await.unwrap();
}

#[tokio::test]
async fn unknown_topic_and_bad_from() {
    let s = start().await;
    let ch = channel(&s).await;
    let st = subscribe(&ch, "nope", None, None).await.unwrap_err();
    assert_eq!(st.code(), Code::NotFound);
    assert!(st.message().contains("nope"));
    // A name no topic can have is the request's fault, not a missing topic.
    for bad in ["", "../x", "a/b"] {
        let st = subscribe(&ch, bad, None, None).await.unwrap_err();
        assert_eq!(st.code(), Code::InvalidArgument, "{bad:?}: {st:?}");
    }

    publish(&ch, "t", frames(&quad_groups(2, 0), quads_opts()))
        .await
        .unwrap();
    let st = subscribe(&ch, "t", None, Some("yesterday"))
        .await
        .unwrap_err();
    assert_eq!(st.code(), Code::InvalidArgument);
    let st = subscribe(&ch, "t", None, Some("9")).await.unwrap_err();
    assert_eq!(st.code(), Code::OutOfRange);
    // `latest` and `last:<n>` work as over HTTP.
    let mut rd = Reader::new(subscribe(&ch, "t", None, Some("last:1")).await.unwrap());
    assert_eq!(rd.next().await.offset(), 1);
    s.shutdown().await.unwrap();
}

#[tokio::test]
async fn resume_from_offset_has_no_gaps_or_duplicates() {
    let s = start().await;
    let ch = channel(&s).await;
    publish(&ch, "r", frames(&quad_groups(6, 0), quads_opts()))
        .await
        .unwrap();

    let mut seen = Vec::new();
    let mut rd = Reader::new(subscribe(&ch, "r", None, None).await.unwrap());
    seen.extend(rd.take(3).await);
    // Disconnect mid-stream (the client drops the call), then resume after the last
    // offset seen, with a fresh decoder (a new Jelly stream).
    drop(rd);
    let next = seen.last().unwrap().offset() + 1;
    let mut rd = Reader::new(
        subscribe(&ch, "r", None, Some(&next.to_string()))
            .await
            .unwrap(),
    );
    seen.extend(rd.take(3).await);
    publish(&ch, "r", frames(&quad_groups(2, 6), quads_opts()))
        .await
        .unwrap();
    seen.extend(rd.take(2).await);

    let offsets: Vec<u64> = seen.iter().map(Got::offset).collect();
    assert_eq!(offsets, (0..8).collect::<Vec<_>>());
    let want: Vec<Statement> = quad_groups(8, 0).concat();
    assert_eq!(flat(&seen), want);
    s.shutdown().await.unwrap();
}

#[tokio::test]
async fn malformed_frames_are_invalid_argument_and_keep_the_log() {
    let s = start().await;
    let ch = channel(&s).await;
    publish(&ch, "m", frames(&quad_groups(2, 0), quads_opts()))
        .await
        .unwrap();
    let log_next = || s.state().topics.get("m").unwrap().log.next_offset();
    assert_eq!(log_next(), 2);

    // Garbage as the first frame: nothing appended.
    let st = publish(&ch, "m", vec![Bytes::from_static(b"\x0a\x05\x0a\x03")])
        .await
        .unwrap_err();
    assert_eq!(st.code(), Code::InvalidArgument, "{st:?}");
    assert!(
        st.message().contains("nothing was appended"),
        "{}",
        st.message()
    );
    assert_eq!(log_next(), 2);

    // Two good frames, then a truncated one: the two stay, the status says so.
    let mut f = frames(&quad_groups(3, 10), quads_opts());
    let bad = f[2].slice(..f[2].len() - 3);
    f[2] = bad;
    let st = publish(&ch, "m", f).await.unwrap_err();
    assert_eq!(st.code(), Code::InvalidArgument, "{st:?}");
    assert!(st.message().contains("frame 2"), "{}", st.message());
    assert!(st.message().contains("2 item(s)"), "{}", st.message());
    assert_eq!(
        st.metadata()
            .get("x-jelly-items")
            .unwrap()
            .to_str()
            .unwrap(),
        "2"
    );
    assert_eq!(log_next(), 4);

    // A later frame of a stream sent alone: it lacks the options row.
    let f = frames(&quad_groups(2, 20), quads_opts());
    let st = publish(&ch, "m", vec![f[1].clone()]).await.unwrap_err();
    assert_eq!(st.code(), Code::InvalidArgument);
    assert!(
        st.message().contains("must be the stream options"),
        "{}",
        st.message()
    );
    assert_eq!(log_next(), 4);
    // A frame without rows before the options row is taken, as over WebSocket (the
    // stream's first row is still its options).
    let f = frames(&quad_groups(2, 30), quads_opts());
    let r = publish(&ch, "m", vec![Bytes::new(), f[0].clone(), f[1].clone()])
        .await
        .unwrap();
    assert_eq!(md_u64(&r, "x-jelly-items"), 2);
    assert_eq!(log_next(), 6);
    s.shutdown().await.unwrap();
}

#[tokio::test]
async fn publish_refusals() {
    let s = start_with(|c| c.max_item_bytes = 2000).await;
    let ch = channel(&s).await;
    let triples = TopicOptions {
        physical: Physical::Triples,
        ..TopicOptions::default()
    };
    s.state().topics.create("tri", Some(triples)).unwrap();
    let tri_next = || s.state().topics.get("tri").unwrap().log.next_offset();

    // No topic metadata.
    let st = publish_md(&ch, &[], frames(&quad_groups(1, 0), quads_opts()))
        .await
        .unwrap_err();
    assert_eq!(st.code(), Code::InvalidArgument);
    assert!(st.message().contains("x-jelly-topic"), "{}", st.message());

    // Item metadata refused as over HTTP: a header with no name, one given twice, and
    // more than 16 KiB in all (in one header or several); nothing is created.
    // Publishes one item to `meta` with `md` as the rest of its metadata: the refusal.
    let refused = |md: tonic::metadata::MetadataMap| {
        let ch = ch.clone();
        async move {
            let mut g = Grpc::new(ch);
            g.ready().await.unwrap();
            let f = frames(&quad_groups(1, 0), quads_opts());
            let mut r = Request::new(futures_util::stream::iter(f.into_iter().map(Frame)));
            *r.metadata_mut() = md;
            r.metadata_mut()
                .insert("x-jelly-topic", "meta".parse().unwrap());
            g.client_streaming(
                r,
                PathAndQuery::from_static(PUBLISH_PATH),
                JellyCodec::<Frame, Received>::new(),
            )
            .await
            .unwrap_err()
        }
    };
    let (big, part_a, part_b) = ("a".repeat(17_000), "b".repeat(10_000), "c".repeat(7_000));
    for md in [
        vec![("x-jelly-header-", "x")],
        vec![("x-jelly-header-d", "1"), ("x-jelly-header-d", "2")],
        vec![("x-jelly-header-big", big.as_str())],
        vec![
            ("x-jelly-header-a", part_a.as_str()),
            ("x-jelly-header-b", part_b.as_str()),
        ],
    ] {
        let mut map = tonic::metadata::MetadataMap::new();
        for (k, v) in &md {
            map.append(*k, v.parse().unwrap());
        }
        let st = refused(map).await;
        let names: Vec<&str> = md.iter().map(|(k, _)| *k).collect();
        assert_eq!(
            st.code(),
            Code::InvalidArgument,
            "{names:?}: {}",
            st.message()
        );
        let m = st.message();
        assert!(
            m.contains("no name") || m.contains("more than once") || m.contains("16"),
            "{m}"
        );
    }
    // A binary header: refused, not dropped.
    let mut map = tonic::metadata::MetadataMap::new();
    map.insert_bin(
        "x-jelly-header-a-bin",
        tonic::metadata::MetadataValue::from_bytes(b"\xff\x00"),
    );
    let st = refused(map).await;
    assert_eq!(st.code(), Code::InvalidArgument);
    assert!(st.message().contains("is binary"), "{}", st.message());
    assert!(s.state().topics.get("meta").is_none());

    // A QUADS publisher into a triples topic, as over HTTP and WebSocket: quads in the
    // default graph are taken (as triples), a named graph is refused, naming the frame;
    // what came before it stays.
    let tri2 = TopicOptions {
        physical: Physical::Triples,
        ..TopicOptions::default()
    };
    s.state().topics.create("tri2", Some(tri2)).unwrap();
    let tri2_next = || s.state().topics.get("tri2").unwrap().log.next_offset();
    let opts = StreamOptions::small().with_physical_type(PhysicalType::Quads);
    let default_graph = Statement {
        graph: None,
        ..quad(1, 0)
    };
    let r = publish(&ch, "tri2", frames(&[vec![default_graph]], opts.clone()))
        .await
        .unwrap();
    assert_eq!(md_u64(&r, "x-jelly-items"), 1);
    assert_eq!(tri2_next(), 1);
    let st = publish(
        &ch,
        "tri2",
        frames(&[vec![triple(2)], vec![quad(3, 0)]], opts),
    )
    .await
    .unwrap_err();
    assert_eq!(st.code(), Code::InvalidArgument);
    assert!(st.message().contains("frame 1"), "{}", st.message());
    assert_eq!(tri2_next(), 2, "the frame before the refused one stays");
    // A feature the topic does not allow: declaring it is fine (as over HTTP), using it
    // is refused.
    let star = StreamOptions::small()
        .with_physical_type(PhysicalType::Triples)
        .with_rdf_star(true);
    let quoted = Statement {
        object: Term::Triple(Box::new(jelly::Triple {
            subject: triple(7).subject,
            predicate: triple(7).predicate,
            object: triple(7).object,
        })),
        ..triple(1)
    };
    let st = publish(&ch, "tri", frames(&[vec![quoted]], star.clone()))
        .await
        .unwrap_err();
    assert_eq!(st.code(), Code::InvalidArgument);
    assert!(
        st.message().contains("RDF-star") || st.message().contains("quoted"),
        "{}",
        st.message()
    );
    assert_eq!(tri_next(), 0);
    publish(&ch, "tri", frames(&[vec![triple(1)]], star))
        .await
        .unwrap();
    assert_eq!(tri_next(), 1, "declared but unused RDF-star is taken");
    // Tables beyond the decoder's caps.
    let huge = StreamOptions::with_tables(100_000, 16, 16);
    let st = publish(&ch, "tri", frames(&[vec![triple(1)]], huge))
        .await
        .unwrap_err();
    assert_eq!(st.code(), Code::InvalidArgument);
    assert!(st.message().contains("name table"), "{}", st.message());
    assert_eq!(tri_next(), 1);

    // An item over max_item_bytes.
    let long = Statement {
        object: Term::simple_literal("x".repeat(3000)),
        ..triple(1)
    };
    let t_opts = StreamOptions::small().with_physical_type(PhysicalType::Triples);
    let st = publish(&ch, "tri", frames(&[vec![triple(2)], vec![long]], t_opts))
        .await
        .unwrap_err();
    assert_eq!(st.code(), Code::ResourceExhausted, "{st:?}");
    assert!(st.message().contains("frame 1"), "{}", st.message());
    assert_eq!(tri_next(), 2, "the frame before the large one stays");

    // A message over the gRPC limit (max(max_item_bytes, 4 MiB)).
    let mut big = frames(
        &[vec![triple(3)]],
        StreamOptions::small().with_physical_type(PhysicalType::Triples),
    );
    big.push(Bytes::from(vec![0u8; 5 << 20]));
    let st = publish(&ch, "tri", big).await.unwrap_err();
    assert_eq!(st.code(), Code::ResourceExhausted, "{st:?}");
    assert_eq!(tri_next(), 3);

    // An empty stream, and streams of no statements (empty frames; an options row
    // alone), as over HTTP: refused, nothing appended.
    let st = publish(&ch, "tri", vec![]).await.unwrap_err();
    assert_eq!(st.code(), Code::InvalidArgument);
    let options_only = frames(&[vec![]], StreamOptions::small());
    for stream in [vec![Bytes::new(), Bytes::new()], options_only] {
        let st = publish(&ch, "tri", stream).await.unwrap_err();
        assert_eq!(st.code(), Code::InvalidArgument);
        assert!(st.message().contains("no statements"), "{}", st.message());
    }
    assert_eq!(tri_next(), 3);
    s.shutdown().await.unwrap();
}

#[tokio::test]
async fn publish_over_grpc_read_over_http() {
    let s = start().await;
    let ch = channel(&s).await;
    let groups = quad_groups(3, 0);
    publish(&ch, "mix", frames(&groups, quads_opts()))
        .await
        .unwrap();
    let resp = reqwest::get(format!(
        "{}/topics/mix/items?follow=false&format=nquads",
        s.url()
    ))
    .await
    .unwrap();
    assert_eq!(resp.status(), reqwest::StatusCode::OK);
    let text = resp.text().await.unwrap();
    let got: Vec<Statement> = text
        .lines()
        .enumerate()
        .filter_map(|(i, l)| jelly::nquads::parse_line(l, i + 1).unwrap())
        .collect();
    assert_eq!(got, groups.concat());

    // And the other way: HTTP publish, gRPC subscribe.
    let resp = reqwest::Client::new()
        .post(format!("{}/topics/mix/items", s.url()))
        .header("content-type", "application/n-quads")
        .body("<http://a/s> <http://a/p> <http://a/o> <http://a/g> .\n")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), reqwest::StatusCode::OK);
    let mut rd = Reader::new(subscribe(&ch, "mix", None, Some("3")).await.unwrap());
    let g = rd.next().await;
    assert_eq!(g.offset(), 3);
    assert_eq!(g.statements[0].object, iri("http://a/o"));
    s.shutdown().await.unwrap();
}

#[tokio::test]
async fn shutdown_ends_live_subscriptions_with_unavailable() {
    let s = start().await;
    let ch = channel(&s).await;
    publish(&ch, "sd", frames(&quad_groups(1, 0), quads_opts()))
        .await
        .unwrap();
    let mut rd = Reader::new(subscribe(&ch, "sd", None, None).await.unwrap());
    assert_eq!(rd.next().await.offset(), 0);
    let stop = tokio::spawn(s.shutdown());
    let st = rd.end().await;
    assert_eq!(st.code(), Code::Unavailable, "{st:?}");
    assert!(st.message().contains("x-jelly-from: 1"), "{}", st.message());
    tokio::time::timeout(LIMIT, stop)
        .await
        .expect("shutdown hangs")
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn routing_unknown_method_and_plain_http() {
    let s = start().await;
    let ch = channel(&s).await;
    let mut g = Grpc::new(ch.clone());
    g.ready().await.unwrap();
    let st = g
        .unary(
            Request::new(Subscribe::default()),
            PathAndQuery::from_static("/eu.ostrzyciel.jelly.core.proto.v1.RdfStreamService/Nope"),
            JellyCodec::<Subscribe, Received>::new(),
        )
        .await
        .unwrap_err();
    assert_eq!(st.code(), Code::Unimplemented, "{st:?}");

    // Plain HTTP on a gRPC path is told to use gRPC; plain HTTP elsewhere is unchanged.
    let resp = reqwest::Client::new()
        .post(format!("{}{SUBSCRIBE_PATH}", s.url()))
        .body("x")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), reqwest::StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let resp = reqwest::get(format!("{}/health", s.url())).await.unwrap();
    assert_eq!(resp.status(), reqwest::StatusCode::OK);
    s.shutdown().await.unwrap();
}

#[tokio::test]
async fn publish_appends_while_the_stream_is_open() {
    let s = start().await;
    let ch = channel(&s).await;
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(4);
    let body =
        futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|f| (f, rx)) });
    let publisher = {
        let ch = ch.clone();
        tokio::spawn(async move {
            let mut g = Grpc::new(ch);
            g.ready().await.unwrap();
            let mut r = Request::new(futures_util::StreamExt::map(body, Frame));
            r.metadata_mut()
                .insert("x-jelly-topic", "open".parse().unwrap());
            g.client_streaming(
                r,
                PathAndQuery::from_static(PUBLISH_PATH),
                JellyCodec::<Frame, Received>::new(),
            )
            .await
        })
    };
    let mut f = frames(&quad_groups(3, 0), quads_opts()).into_iter();
    tx.send(f.next().unwrap()).await.unwrap();
    tx.send(f.next().unwrap()).await.unwrap();
    // The two items are readable while the publish call is still open.
    let sub = tokio::time::timeout(LIMIT, async {
        loop {
            match subscribe(&ch, "open", None, None).await {
                Ok(sub) => break sub,
                // The topic is created by the first append.
                Err(st) if st.code() == Code::NotFound => tokio::task::yield_now().await,
                Err(st) => panic!("{st:?}"),
            }
        }
    })
    .await
    .expect("the topic never appeared");
    let mut rd = Reader::new(sub);
    let got = rd.take(2).await;
    assert_eq!(got[1].offset(), 1);
    assert!(!publisher.is_finished());
    tx.send(f.next().unwrap()).await.unwrap();
    drop(tx);
    let r = tokio::time::timeout(LIMIT, publisher)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(md_u64(&r, "x-jelly-items"), 3);
    assert_eq!(md_u64(&r, "x-jelly-last-offset"), 2);
    assert_eq!(rd.next().await.statements, quad_groups(1, 2)[0]);
    s.shutdown().await.unwrap();
}

/// A `PublishRdf` request stream the server cannot read (cut inside a message, a
/// compressed flag without `grpc-encoding`) is the client's fault: INVALID_ARGUMENT,
/// not tonic's INTERNAL. Sent over plain HTTP/2, since a gRPC client cannot send it.
#[tokio::test]
async fn unreadable_publish_streams_are_invalid_argument() {
    let srv = Server::start(ServerConfig::ephemeral()).await.unwrap();
    for (what, body) in [
        ("cut inside a message", vec![0u8, 0, 0, 0, 100, 1, 2, 3]),
        (
            "compressed flag, no grpc-encoding",
            vec![1u8, 0, 0, 0, 1, 0],
        ),
    ] {
        let body = http_body_util::Full::new(Bytes::from(body));
        let get = raw_grpc_call(&srv, PUBLISH_PATH, &[("x-jelly-topic", "raw")], body).await;
        assert_eq!(get("grpc-status"), "3", "{what}");
    }
    srv.shutdown().await.unwrap();
}

/// A gRPC message flagged compressed: `members` each gzipped, then `after`.
fn gzip_message(members: &[&[u8]], after: &[u8]) -> Vec<u8> {
    use std::io::Write as _;
    let mut payload = Vec::new();
    for m in members {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(m).unwrap();
        payload.extend(e.finish().unwrap());
    }
    payload.extend(after);
    let mut msg = vec![1u8];
    msg.extend((payload.len() as u32).to_be_bytes());
    msg.extend(payload);
    msg
}

/// A compressed `PublishRdf` message must be compressed data and nothing else, as an
/// HTTP request body must: bytes after a message's gzip data (which tonic's own
/// decompression ignores) are INVALID_ARGUMENT naming the message, and nothing of
/// that message is appended. A message of several gzip members is read whole.
#[tokio::test]
async fn compressed_publish_messages_with_bytes_after_their_data_are_refused() {
    let s = start().await;
    let ch = channel(&s).await;
    let groups = quad_groups(3, 0);
    let fr = frames(&groups, quads_opts());
    let half = fr[0].len() / 2;
    let body = [
        // Frame 0 in two gzip members.
        gzip_message(&[&fr[0][..half], &fr[0][half..]], b""),
        // Frame 1 with junk after its gzip data; frame 2 is never read.
        gzip_message(&[&fr[1]], b"JUNK"),
        gzip_message(&[&fr[2]], b""),
    ]
    .concat();
    let md = [("x-jelly-topic", "gzjunk"), ("grpc-encoding", "gzip")];
    let body = http_body_util::Full::new(Bytes::from(body));
    let get = raw_grpc_call(&s, PUBLISH_PATH, &md, body).await;
    assert_eq!(get("grpc-status"), "3");
    let m = get("grpc-message").replace("%20", " ");
    assert!(
        m.contains("frame 1 (counting from 0)") && m.contains("4 byte(s) after its gzip data"),
        "{m}"
    );
    assert_eq!(get("x-jelly-items"), "1", "{m}");
    assert_eq!(s.state().topics.get("gzjunk").unwrap().log.next_offset(), 1);
    let mut rd = Reader::new(subscribe(&ch, "gzjunk", None, None).await.unwrap());
    assert_eq!(flat(&rd.take(1).await), groups[0]);

    // The same for SubscribeRdf's request message.
    let sub = [0x0a, 6, b'g', b'z', b'j', b'u', b'n', b'k'];
    let body = http_body_util::Full::new(Bytes::from(gzip_message(&[&sub], b"!")));
    let get = raw_grpc_call(&s, SUBSCRIBE_PATH, &[("grpc-encoding", "gzip")], body).await;
    assert_eq!(get("grpc-status"), "3");
    let m = get("grpc-message").replace("%20", " ");
    assert!(m.contains("after its gzip data"), "{m}");
    s.shutdown().await.unwrap();
}

/// A gRPC call made by hand over HTTP/2 (for what a tonic client would not send):
/// POSTs `body` to `path` with `headers` and returns a lookup of the answer's headers
/// and trailers together (a status may come in either).
async fn raw_grpc_call<B>(
    srv: &Server,
    path: &str,
    headers: &[(&str, &str)],
    body: B,
) -> impl Fn(&str) -> String + use<B>
where
    B: http_body::Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let all = support::raw_grpc(srv.local_addr(), path, headers, body, LIMIT)
        .await
        .expect("an answer in time");
    move |k: &str| {
        all.get(k)
            .map(|v| v.to_str().unwrap().to_string())
            .unwrap_or_default()
    }
}

/// A `PublishRdf` call whose messages the client compresses with `enc`.
async fn publish_compressed(
    ch: &Channel,
    topic: &str,
    enc: tonic::codec::CompressionEncoding,
    frames: Vec<Bytes>,
) -> Result<Response<Received>, Status> {
    let mut g = Grpc::new(ch.clone()).send_compressed(enc);
    g.ready().await.unwrap();
    let mut r = Request::new(futures_util::stream::iter(frames.into_iter().map(Frame)));
    r.metadata_mut()
        .insert("x-jelly-topic", topic.parse().unwrap());
    g.client_streaming(
        r,
        PathAndQuery::from_static(PUBLISH_PATH),
        JellyCodec::<Frame, Received>::new(),
    )
    .await
}

#[tokio::test]
async fn publishers_may_compress_their_messages_within_the_size_limit() {
    use tonic::codec::CompressionEncoding::{Gzip, Zstd};
    let s = start().await;
    let ch = channel(&s).await;
    for (i, enc) in [Gzip, Zstd].into_iter().enumerate() {
        let topic = format!("z{i}");
        let groups = quad_groups(3, 0);
        let r = publish_compressed(&ch, &topic, enc, frames(&groups, quads_opts()))
            .await
            .unwrap();
        assert_eq!(md_u64(&r, "x-jelly-items"), 3, "{enc:?}");
        // The answer says which encodings the server reads.
        assert_eq!(
            r.metadata()
                .get("grpc-accept-encoding")
                .map(|v| v.to_str().unwrap()),
            Some("gzip,zstd"),
            "{enc:?}"
        );
        let mut rd = Reader::new(subscribe(&ch, &topic, None, None).await.unwrap());
        assert_eq!(flat(&rd.take(3).await), groups.concat(), "{enc:?}");
        // A message that decompresses past the limit (`max_item_bytes`, 16 MiB here)
        // is refused while decompressing.
        let mut bomb = frames(&quad_groups(1, 3), quads_opts());
        bomb.push(Bytes::from(vec![0u8; 17 << 20]));
        let st = publish_compressed(&ch, &topic, enc, bomb)
            .await
            .unwrap_err();
        assert_eq!(
            st.code(),
            Code::ResourceExhausted,
            "{enc:?}: {}",
            st.message()
        );
    }
    s.shutdown().await.unwrap();
}

#[tokio::test]
async fn calls_end_with_deadline_exceeded_at_their_grpc_timeout() {
    let s = start().await;
    let ch = channel(&s).await;
    publish(&ch, "dl", frames(&quad_groups(2, 0), quads_opts()))
        .await
        .unwrap();
    // A subscription: the stored items, then DEADLINE_EXCEEDED from the server (the
    // tonic client only sends the header; it does not enforce it).
    let mut g = Grpc::new(ch.clone());
    g.ready().await.unwrap();
    let mut r = Request::new(Subscribe {
        topic: "dl".into(),
        requested_options: None,
    });
    r.set_timeout(Duration::from_millis(300));
    let stream = g
        .server_streaming(
            r,
            PathAndQuery::from_static(SUBSCRIBE_PATH),
            JellyCodec::<Subscribe, Frame>::new(),
        )
        .await
        .unwrap()
        .into_inner();
    let mut rd = Reader::new(stream);
    assert_eq!(rd.take(2).await.len(), 2);
    let st = rd.end().await;
    assert_eq!(st.code(), Code::DeadlineExceeded, "{}", st.message());
    assert!(
        st.message().contains("grpc-timeout of 300 ms"),
        "{}",
        st.message()
    );

    // A publish that keeps its stream open: what it sent stays appended. (A raw
    // HTTP/2 call: tonic's client would cancel at its own deadline first.)
    let (tx, rx) =
        tokio::sync::mpsc::channel::<Result<http_body::Frame<Bytes>, std::convert::Infallible>>(4);
    for f in frames(&quad_groups(2, 2), quads_opts()) {
        let mut m = vec![0u8];
        m.extend_from_slice(&(f.len() as u32).to_be_bytes());
        m.extend_from_slice(&f);
        tx.send(Ok(http_body::Frame::data(Bytes::from(m))))
            .await
            .unwrap();
    }
    let body = http_body_util::StreamBody::new(Box::pin(futures_util::stream::unfold(
        rx,
        |mut rx| async move { rx.recv().await.map(|f| (f, rx)) },
    )));
    let md = [("grpc-timeout", "300m"), ("x-jelly-topic", "dl")];
    let get = raw_grpc_call(&s, PUBLISH_PATH, &md, body).await;
    assert_eq!(get("grpc-status"), "4");
    assert!(
        get("grpc-message").contains("grpc-timeout"),
        "{}",
        get("grpc-message")
    );
    assert_eq!(get("x-jelly-items"), "2");
    assert_eq!(s.state().topics.get("dl").unwrap().log.next_offset(), 4);
    drop(tx);

    // A malformed timeout is refused.
    let mut g = Grpc::new(ch.clone());
    g.ready().await.unwrap();
    let mut r = Request::new(Subscribe {
        topic: "dl".into(),
        requested_options: None,
    });
    r.metadata_mut()
        .insert("grpc-timeout", "soon".parse().unwrap());
    let st = g
        .server_streaming(
            r,
            PathAndQuery::from_static(SUBSCRIBE_PATH),
            JellyCodec::<Subscribe, Frame>::new(),
        )
        .await
        .unwrap_err();
    assert_eq!(st.code(), Code::InvalidArgument, "{}", st.message());
    s.shutdown().await.unwrap();
}

#[tokio::test]
async fn subscribe_requests_hold_exactly_one_message() {
    let srv = start().await;
    let ch = channel(&srv).await;
    publish(&ch, "one", frames(&quad_groups(1, 0), quads_opts()))
        .await
        .unwrap();
    // RdfStreamSubscribe { topic: "one" }, as a gRPC message.
    let msg = |flag: u8| vec![flag, 0, 0, 0, 5, 0x0a, 3, b'o', b'n', b'e'];
    let identity = [("grpc-encoding", "identity")];
    for (what, body, md, want) in [
        (
            "two messages",
            [msg(0), msg(0)].concat(),
            &[][..],
            "one request message",
        ),
        (
            "compressed flag, no grpc-encoding",
            msg(1),
            &[][..],
            "no grpc-encoding",
        ),
        (
            "compressed flag, grpc-encoding identity",
            msg(1),
            &identity[..],
            "grpc-encoding is identity",
        ),
    ] {
        let body = http_body_util::Full::new(Bytes::from(body));
        let get = raw_grpc_call(&srv, SUBSCRIBE_PATH, md, body).await;
        assert_eq!(get("grpc-status"), "3", "{what}");
        let m = get("grpc-message");
        assert!(
            m.contains(&want.replace(' ', "%20")) || m.contains(want),
            "{what}: {m}"
        );
    }
    srv.shutdown().await.unwrap();
}
