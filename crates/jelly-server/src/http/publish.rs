//! `POST /topics/{name}/items`: publish (atomic; `?stream=true` hands over to
//! [`super::publish_stream`]).

use std::sync::atomic::Ordering;

use axum::Json;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{ApiError, AppState, JsonQuery};
use crate::ingest::{
    ACCEPTED_CONTENT_TYPES, IngestError, InputFormat, PublishMeta, ingest_with_paths,
};
use crate::log::LogError;
use crate::topic::valid_name;

#[derive(Debug, Deserialize, Default)]
pub struct PublishQuery {
    /// `graph`: one item per named graph (text bodies).
    split: Option<String>,
    /// Base IRI for relative IRIs in Turtle and TriG.
    base: Option<String>,
    /// `true`: a long-lived delimited Jelly stream, appended as its frames arrive.
    stream: Option<bool>,
}

/// Bodies below this size are ingested on the request's task (see `publish_inner`).
const INLINE_INGEST_BYTES: usize = 64 << 10;

/// Prefix of the headers stored with each item.
const HEADER_PREFIX: &str = "x-jelly-header-";

pub(super) fn meta_from(headers: &HeaderMap, q: &PublishQuery) -> Result<PublishMeta, ApiError> {
    let text = |name: &str, v: &axum::http::HeaderValue| {
        v.to_str()
            .map(str::to_string)
            .map_err(|_| ApiError::bad_request(format!("header {name} is not visible ASCII")))
    };
    let source = match headers.get("x-jelly-source") {
        Some(v) => text("X-Jelly-Source", v)?,
        None => String::new(),
    };
    let mut hs = Vec::new();
    for (k, v) in headers {
        if let Some(name) = k.as_str().strip_prefix(HEADER_PREFIX)
            && !name.is_empty()
        {
            hs.push((name.to_string(), text(k.as_str(), v)?));
        }
    }
    let split_graph = match q.split.as_deref() {
        None | Some("none") | Some("") => false,
        Some("graph") => true,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "unknown split `{other}` (graph or none)"
            )));
        }
    };
    Ok(PublishMeta {
        source,
        headers: hs,
        split_graph,
        base_iri: q.base.clone(),
    })
}

pub(super) fn ingest_error(e: IngestError) -> ApiError {
    let status = match e {
        IngestError::Invalid(_) => StatusCode::BAD_REQUEST,
        IngestError::NotAllowed(_) => StatusCode::UNPROCESSABLE_ENTITY,
        IngestError::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
    };
    ApiError::new(status, e.to_string())
}

/// Decodes and checks the whole body, then appends all its items as one batch.
pub async fn publish(
    State(s): State<AppState>,
    Path(name): Path<String>,
    JsonQuery(q): JsonQuery<PublishQuery>,
    headers: HeaderMap,
    body: Body,
) -> Result<Json<Value>, ApiError> {
    s.metrics.requests_publish.fetch_add(1, Ordering::Relaxed);
    if q.stream == Some(true) {
        return publish_stream_checked(s, &name, &q, &headers, body).await;
    }
    let r = publish_inner(&s, &name, &q, &headers, body).await;
    if r.is_err() {
        s.metrics.publish_rejected.fetch_add(1, Ordering::Relaxed);
    }
    r
}

/// Checks a streaming publish request, then runs it.
async fn publish_stream_checked(
    s: AppState,
    name: &str,
    q: &PublishQuery,
    headers: &HeaderMap,
    body: Body,
) -> Result<Json<Value>, ApiError> {
    let checked = (|| {
        let ct = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        if InputFormat::from_content_type(ct) != Some(InputFormat::Jelly) {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                format!(
                    "unsupported Content-Type `{ct}` for a streaming publish; use application/x-jelly-rdf"
                ),
            ));
        }
        let meta = meta_from(headers, q)?;
        if meta.split_graph {
            return Err(ApiError::bad_request(
                "split=graph does not apply to a streaming publish (one item per frame)",
            ));
        }
        Ok(meta)
    })();
    let meta = match checked {
        Ok(m) => m,
        Err(e) => {
            s.metrics.publish_rejected.fetch_add(1, Ordering::Relaxed);
            return Err(e);
        }
    };
    // publish_stream counts its own refusals (it may have appended items by then).
    super::publish_stream::publish_stream(s, name, meta, body).await
}

async fn publish_inner(
    s: &AppState,
    name: &str,
    q: &PublishQuery,
    headers: &HeaderMap,
    body: Body,
) -> Result<Json<Value>, ApiError> {
    if !valid_name(name) {
        return Err(crate::topic::TopicError::BadName(name.to_string()).into());
    }
    // Before the body is read: a mirrored topic's offsets are its upstream's.
    s.topics.check_publish(name)?;
    let ct = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let format = InputFormat::from_content_type(ct).ok_or_else(|| {
        ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!("unsupported Content-Type `{ct}`; use one of {ACCEPTED_CONTENT_TYPES}"),
        )
    })?;
    let meta = meta_from(headers, q)?;
    let max_body = s.config.max_body_bytes;
    let body = axum::body::to_bytes(body, max_body).await.map_err(|e| {
        // to_bytes fails for an over-long body, or when the connection breaks.
        if e.to_string().contains("length limit") {
            ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("request body over the limit of {max_body} bytes"),
            )
            .with("max_body_bytes", max_body)
        } else {
            ApiError::bad_request(format!("cannot read the request body: {e}"))
        }
    })?;

    // Check the body against the topic's options (or the defaults for a new topic)
    // before the topic is created, so a refused body creates nothing.
    let mut options = match s.topics.get(name) {
        Some(t) => t.options.clone(),
        None => s.config.topic_defaults.clone(),
    };
    let max_item = s.config.max_item_bytes;
    let items = loop {
        // Small bodies are decoded right here: a hand-off to the blocking pool costs a
        // thread wake-up, which is most of the publish latency of a small item. Large
        // ones go to the blocking pool so they do not hold up the runtime.
        let (items, paths) = if body.len() < INLINE_INGEST_BYTES {
            ingest_with_paths(&body, format, &options, &meta, max_item)
        } else {
            let (b, o, m) = (body.clone(), options.clone(), meta.clone());
            tokio::task::spawn_blocking(move || ingest_with_paths(&b, format, &o, &m, max_item))
                .await
                .map_err(|e| {
                    ApiError::new(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        format!("ingest failed: {e}"),
                    )
                })?
        }
        .map_err(ingest_error)?;
        let topic = s.topics.for_publish(name)?;
        if topic.options == options {
            s.metrics.count_ingest(paths);
            break (topic, items);
        }
        // Created concurrently with other options: check again against those.
        options = topic.options.clone();
    };
    let (topic, items) = items;
    let offsets = topic.append(items, &s.metrics).await.map_err(|e| match e {
        LogError::ItemTooLarge { .. } => {
            ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, e.to_string())
        }
        e => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("append failed: {e}"),
        ),
    })?;
    tracing::debug!(topic = name, items = offsets.len(), "published");
    Ok(Json(json!({ "topic": name, "offsets": offsets })))
}
