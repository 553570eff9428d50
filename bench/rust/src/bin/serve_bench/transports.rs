//! Publisher and subscriber clients of each transport.

use std::sync::Arc;
use std::time::{Duration, Instant};

use jelly::{Decoder, Event, PhysicalType};
use jelly_proto::wire::put_varint;
use tokio::sync::mpsc::UnboundedSender;

/// How the benchmark talks to the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// Publish: POST of delimited Jelly; subscribe: chunked GET.
    Http,
    /// WebSocket publish and subscribe, one frame per message.
    Ws,
    /// gRPC `PublishRdf` and `SubscribeRdf`.
    Grpc,
}

impl Transport {
    pub fn parse(s: &str) -> Option<Transport> {
        match s {
            "http" => Some(Transport::Http),
            "ws" => Some(Transport::Ws),
            "grpc" => Some(Transport::Grpc),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Transport::Http => "http",
            Transport::Ws => "ws",
            Transport::Grpc => "grpc",
        }
    }

    /// Whether each publish request starts a new Jelly stream (so items must be
    /// encoded as independent streams rather than as one continuous stream).
    pub fn one_stream_per_request(self) -> bool {
        self == Transport::Http
    }
}

/// One item as decoded by the subscriber.
#[derive(Debug, Clone, Copy)]
pub struct Arrival {
    pub offset: u64,
    pub statements: usize,
    pub at: Instant,
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(600))
        .build()
        .expect("http client")
}

/// Creates the topic with the stream's physical type.
pub async fn create_topic(url: &str, topic: &str, physical: PhysicalType) -> Result<(), String> {
    let physical = if physical == PhysicalType::Quads {
        "quads"
    } else {
        "triples"
    };
    let r = client()
        .put(format!("{url}/topics/{topic}"))
        .json(&serde_json::json!({ "physical": physical }))
        .send()
        .await
        .map_err(|e| e.to_string())?;
    if !r.status().is_success() {
        return Err(format!("create topic: {}", r.status()));
    }
    Ok(())
}

/// Waits until the server lists a subscriber on the topic.
pub async fn wait_subscribed(url: &str, topic: &str) -> Result<(), String> {
    let c = client();
    for _ in 0..500 {
        let v: serde_json::Value = c
            .get(format!("{url}/topics/{topic}"))
            .send()
            .await
            .map_err(|e| e.to_string())?
            .json()
            .await
            .map_err(|e| e.to_string())?;
        if v["subscribers"].as_array().is_some_and(|s| !s.is_empty()) {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Err("the subscriber never registered".into())
}

/// Decodes one frame: its statement count and `offset` metadata.
fn decode_frame(dec: &mut Decoder, frame: &[u8]) -> Result<(u64, usize), String> {
    let mut cur = dec.frame(frame);
    let mut n = 0;
    while let Some(ev) = cur.next_event().map_err(|e| e.to_string())? {
        if let Event::Statement(_) = ev {
            n += 1;
        }
    }
    let offset = cur
        .metadata()
        .map_err(|e| e.to_string())?
        .into_iter()
        .find(|(k, _)| *k == "offset")
        .and_then(|(_, v)| std::str::from_utf8(v).ok()?.parse().ok())
        .ok_or("a frame without offset metadata")?;
    Ok((offset, n))
}

/// Splits a delimited byte stream into frames as chunks arrive.
#[derive(Default)]
struct Splitter {
    buf: Vec<u8>,
}

impl Splitter {
    /// Appends a chunk and hands every complete frame to `f`.
    fn push(
        &mut self,
        chunk: &[u8],
        mut f: impl FnMut(&[u8]) -> Result<(), String>,
    ) -> Result<(), String> {
        self.buf.extend_from_slice(chunk);
        let mut pos = 0;
        loop {
            let mut len: u64 = 0;
            let mut shift = 0;
            let mut i = pos;
            let mut complete = false;
            while i < self.buf.len() && shift < 64 {
                let b = self.buf[i];
                len |= u64::from(b & 0x7f) << shift;
                i += 1;
                if b & 0x80 == 0 {
                    complete = true;
                    break;
                }
                shift += 7;
            }
            if !complete || self.buf.len() - i < len as usize {
                break;
            }
            let end = i + len as usize;
            f(&self.buf[i..end])?;
            pos = end;
        }
        self.buf.drain(..pos);
        Ok(())
    }
}

/// Follows the topic from offset 0, sending one [`Arrival`] per decoded item.
pub async fn subscribe(
    transport: Transport,
    url: String,
    topic: String,
    tx: UnboundedSender<Arrival>,
) -> Result<(), String> {
    match transport {
        Transport::Http => {
            let mut r = client()
                .get(format!("{url}/topics/{topic}/items?from=earliest"))
                .send()
                .await
                .map_err(|e| e.to_string())?;
            let mut dec = Decoder::default();
            let mut split = Splitter::default();
            while let Some(chunk) = r.chunk().await.map_err(|e| e.to_string())? {
                let at = Instant::now();
                split.push(&chunk, |frame| {
                    let (offset, statements) = decode_frame(&mut dec, frame)?;
                    let _ = tx.send(Arrival {
                        offset,
                        statements,
                        at,
                    });
                    Ok(())
                })?;
            }
            Ok(())
        }
        other => Err(format!(
            "{} is not built into this benchmark yet",
            other.name()
        )),
    }
}

/// Items of one HTTP request (independent spliceable streams, so they concatenate).
const HTTP_BATCH: usize = 64;

/// Publishes every frame as fast as the transport takes them.
pub async fn publish_all(
    transport: Transport,
    url: String,
    topic: String,
    frames: Arc<Vec<Vec<u8>>>,
) -> Result<(), String> {
    match transport {
        Transport::Http => {
            let c = client();
            for batch in frames.chunks(HTTP_BATCH) {
                let mut body = Vec::new();
                for f in batch {
                    put_varint(&mut body, f.len() as u64);
                    body.extend_from_slice(f);
                }
                post(&c, &url, &topic, body).await?;
            }
            Ok(())
        }
        other => Err(format!(
            "{} is not built into this benchmark yet",
            other.name()
        )),
    }
}

async fn post(c: &reqwest::Client, url: &str, topic: &str, body: Vec<u8>) -> Result<(), String> {
    let r = c
        .post(format!("{url}/topics/{topic}/items"))
        .header("content-type", "application/x-jelly-rdf")
        .body(body)
        .send()
        .await
        .map_err(|e| e.to_string())?;
    if !r.status().is_success() {
        return Err(format!(
            "publish: {} {}",
            r.status(),
            r.text().await.unwrap_or_default()
        ));
    }
    Ok(())
}

/// Waits until `due`: sleeps while far, then spins (thread sleeps are too coarse for
/// 100 µs intervals).
fn wait_until(due: Instant) {
    loop {
        let now = Instant::now();
        if now >= due {
            return;
        }
        let left = due - now;
        if left > Duration::from_micros(300) {
            std::thread::sleep(left - Duration::from_micros(200));
        } else {
            std::hint::spin_loop();
        }
    }
}

/// Publishes one frame per `interval` on its own thread (open loop) and returns the
/// send time of each.
pub fn publish_paced(
    transport: Transport,
    url: String,
    topic: String,
    frames: Vec<Vec<u8>>,
    interval: Duration,
) -> tokio::task::JoinHandle<Result<Vec<Instant>, String>> {
    tokio::task::spawn_blocking(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        rt.block_on(async move {
            let mut sent = Vec::with_capacity(frames.len());
            match transport {
                Transport::Http => {
                    let c = client();
                    let t0 = Instant::now() + Duration::from_millis(20);
                    for (i, f) in frames.into_iter().enumerate() {
                        wait_until(t0 + interval * i as u32);
                        sent.push(Instant::now());
                        let mut body = Vec::with_capacity(f.len() + 4);
                        put_varint(&mut body, f.len() as u64);
                        body.extend_from_slice(&f);
                        post(&c, &url, &topic, body).await?;
                    }
                    Ok(sent)
                }
                other => Err(format!(
                    "{} is not built into this benchmark yet",
                    other.name()
                )),
            }
        })
    })
}
