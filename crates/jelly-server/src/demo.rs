//! `jelly serve --demo`: replays a recorded stream into a topic, a few items a second.
//!
//! The weather dataset (`iot-assist-weather.nt` with `frames.txt`, the number of
//! triples in each frame of the source stream) becomes one item per source frame.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::http::AppState;
use crate::ingest::{InputFormat, PublishMeta, ingest};
use crate::topic::{Physical, TopicOptions};

/// The demo topic's log limit when the topic defaults set none.
pub const DEMO_RETENTION_BYTES: u64 = 64 << 20;

/// One recorded item: N-Triples text.
pub struct DemoData {
    pub items: Vec<String>,
}

/// The embedded demo stream (see `demo/README.md`): zstd-compressed N-Triples, and
/// the triples per item.
const EMBEDDED_NT: &[u8] = include_bytes!("../demo/weather.nt.zst");
const EMBEDDED_FRAMES: &str = include_str!("../demo/weather-frames.txt");

impl DemoData {
    /// Reads `data.nt` and splits it by the counts in `frames.txt` (comment lines start with `#`).
    pub fn load(nt: &Path, frames: &Path) -> std::io::Result<DemoData> {
        let text = std::fs::read_to_string(nt)?;
        let counts = std::fs::read_to_string(frames)?;
        Self::split(&text, &counts, &frames.display().to_string())
    }

    /// The demo stream built into the binary: the first 100 items (25,300 triples) of
    /// the weather dataset, so that `--demo` needs no files.
    ///
    /// ```
    /// let d = jelly_server::demo::DemoData::embedded().unwrap();
    /// assert_eq!(d.items.len(), 100);
    /// ```
    pub fn embedded() -> std::io::Result<DemoData> {
        let text = zstd::decode_all(EMBEDDED_NT)?;
        let text = String::from_utf8(text)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
        Self::split(&text, EMBEDDED_FRAMES, "embedded weather-frames.txt")
    }

    /// Splits N-Triples `text` into items of the sizes listed in `counts`.
    fn split(text: &str, counts: &str, counts_name: &str) -> std::io::Result<DemoData> {
        let mut lines = text.lines();
        let mut items = Vec::new();
        for c in counts.lines() {
            let c = c.trim();
            if c.is_empty() || c.starts_with('#') {
                continue;
            }
            let n: usize = c.parse().map_err(|_| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("{counts_name}: `{c}` is not a count"),
                )
            })?;
            let mut item = String::new();
            for line in lines.by_ref().take(n) {
                item.push_str(line);
                item.push('\n');
            }
            if !item.is_empty() {
                items.push(item);
            }
        }
        Ok(DemoData { items })
    }
}

/// Publishes the demo items into `topic` (created as a triples topic) at `per_sec`
/// items a second, from the start again when done, until shutdown.
pub async fn run(
    state: AppState,
    data: DemoData,
    topic: &str,
    per_sec: f64,
    mut shutdown: watch::Receiver<bool>,
) {
    let defaults = state.topics.defaults();
    let options = TopicOptions {
        physical: Physical::Triples,
        logical: Some("graphs".into()),
        // The demo repeats forever: without a limit of the configuration's own (the
        // memory log has one by default), its log keeps the newest 64 MiB, so a demo
        // left running does not fill the disk.
        retention_bytes: match defaults.retention_bytes {
            0 => DEMO_RETENTION_BYTES,
            n => n,
        },
        ..defaults.clone()
    };
    // A topic of an earlier run whose retention was changed since is still the demo's.
    let existing = state
        .topics
        .get(topic)
        .filter(|t| t.options().same_items(&options));
    let created = match existing {
        Some(t) => Ok(t),
        None => state.topics.create(topic, Some(options)).map(|(t, _)| t),
    };
    let t = match created {
        Ok(t) => t,
        Err(e) => {
            tracing::error!(topic, error = %e, "demo publisher cannot create its topic");
            return;
        }
    };
    let period = Duration::from_secs_f64(1.0 / per_sec.max(0.01));
    let mut tick = tokio::time::interval(period);
    let meta = PublishMeta {
        source: "demo:iot-assist-weather".into(),
        ..Default::default()
    };
    tracing::info!(
        topic,
        items = data.items.len(),
        per_sec,
        "demo publisher started"
    );
    for round in 0u64.. {
        for (i, text) in data.items.iter().enumerate() {
            tokio::select! {
                _ = tick.tick() => {}
                _ = shutdown.wait_for(|s| *s) => return,
            }
            let mut m = meta.clone();
            m.headers = vec![
                ("round".into(), round.to_string()),
                ("frame".into(), i.to_string()),
            ];
            let items = match ingest(
                text.as_bytes(),
                InputFormat::NTriples,
                &t.options(),
                &m,
                state.config.max_item_bytes,
            ) {
                Ok(items) => items,
                Err(e) => {
                    tracing::warn!(frame = i, error = %e, "demo item skipped");
                    continue;
                }
            };
            if let Err(e) = t.append(items, &state.metrics).await {
                tracing::error!(error = %e, "demo append failed");
                return;
            }
        }
    }
}

/// Starts the demo publisher in the background.
pub fn spawn(state: AppState, data: DemoData, per_sec: f64, shutdown: watch::Receiver<bool>) {
    let state: AppState = Arc::clone(&state);
    tokio::spawn(async move { run(state, data, "weather", per_sec, shutdown).await });
}
