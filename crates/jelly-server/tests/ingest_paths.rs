//! Which path a published Jelly frame takes into the log, seen from outside: a
//! publisher whose options fit the topic's has its frames rebased (stored as sent), one
//! whose options do not has them re-encoded; both read back the same. The counters are
//! the server's own, so each test starts from zero.

use std::time::Duration;

use jelly::{Statement, StreamOptions};
use jelly_server::{Server, ServerConfig};
use reqwest::StatusCode;

mod support;

use support::{iri, jelly_stream};

const JELLY: &str = "application/x-jelly-rdf";

/// 12 groups of 5 quads; subjects run across group boundaries, so a group's first
/// quad repeats terms of the previous group's last.
fn groups() -> Vec<Vec<Statement>> {
    (0..12)
        .map(|g| {
            (0..5)
                .map(|k| {
                    let i = g * 5 + k;
                    Statement {
                        subject: iri(&format!("http://ex.org/s{}", (i + 2) / 7)),
                        predicate: iri(&format!("http://ex.org/v#p{}", i % 3)),
                        object: iri(&format!("http://ex.org/o/{i}")),
                        graph: Some(iri("http://ex.org/g")),
                    }
                })
                .collect()
        })
        .collect()
}

async fn counters(c: &reqwest::Client, srv: &Server) -> (u64, u64) {
    (
        support::metric(c, srv, "jelly_ingest_frames_rebased_total").await,
        support::metric(c, srv, "jelly_ingest_frames_reencoded_total").await,
    )
}

/// Publishes `body` to `topic` (as one request, or as a streaming publish with
/// `?stream=true`), then reads the topic back from offset 0.
async fn publish_and_read(
    c: &reqwest::Client,
    base: &str,
    topic: &str,
    body: Vec<u8>,
    stream: bool,
) -> Vec<(u64, Vec<Statement>)> {
    let r = c
        .post(format!("{base}/topics/{topic}/items?stream={stream}"))
        .header("content-type", JELLY)
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK, "{}", r.text().await.unwrap());
    let r = c
        .get(format!("{base}/topics/{topic}/poll?from=0&max_items=100"))
        .header("accept", JELLY)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    support::frames(&r.bytes().await.unwrap())
}

async fn check_paths(stream: bool) {
    let srv = Server::start(ServerConfig::ephemeral()).await.unwrap();
    let c = reqwest::Client::builder()
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap();
    let base = srv.url();
    let want = groups();
    let quads = |o: StreamOptions| o.with_physical_type(jelly::PhysicalType::Quads);
    assert_eq!(
        counters(&c, &srv).await,
        (0, 0),
        "a new server counts nothing"
    );

    // SMALL tables fit the topic's BIG ones: every frame rebased.
    let body = jelly_stream(&want, quads(StreamOptions::small()));
    let got = publish_and_read(&c, &base, "fits", body, stream).await;
    assert_eq!(counters(&c, &srv).await, (12, 0));
    let expected: Vec<(u64, Vec<Statement>)> = (0..).zip(want.clone()).collect();
    assert_eq!(got, expected);

    // A name table larger than the topic's 4000: every frame re-encoded.
    let big_names = quads(StreamOptions::with_tables(4096, 150, 32));
    let body = jelly_stream(&want, big_names);
    let got = publish_and_read(&c, &base, "too-big", body, stream).await;
    assert_eq!(counters(&c, &srv).await, (12, 12));
    assert_eq!(got, expected);

    // A text body takes neither path.
    let r = c
        .post(format!("{base}/topics/fits/items"))
        .header("content-type", "application/n-quads")
        .body("<http://ex.org/s> <http://ex.org/p> <http://ex.org/o> <http://ex.org/g> .\n")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(counters(&c, &srv).await, (12, 12));
    srv.shutdown().await.unwrap();
}

#[tokio::test]
async fn fitting_publishers_are_rebased_and_others_re_encoded() {
    check_paths(false).await;
}

#[tokio::test]
async fn streaming_publishers_are_counted_the_same() {
    check_paths(true).await;
}
