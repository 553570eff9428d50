//! `GET /topics`, and `GET`, `PUT`, `PATCH` and `DELETE /topics/{name}`.

use std::sync::atomic::Ordering;

use axum::Json;
use axum::body::Body;
use axum::extract::{Extension, Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde_json::{Value, json};

use super::{ApiError, AppState, JsonQuery, NoQuery, blocking};
use crate::auth::{Caller, Right};
use crate::topic::{RetentionChange, Topic, TopicOptions};

/// The description of a topic, as JSON.
pub fn describe_json(t: &Topic) -> Value {
    let first = t.log.first_offset();
    let next = t.log.next_offset();
    let mut options = serde_json::to_value(&*t.options()).unwrap_or(Value::Null);
    if let Value::Object(m) = &mut options {
        let lt = t.options().logical_type().unwrap_or_default();
        m.insert("logical".into(), json!(lt.name()));
    }
    let subscribers: Vec<Value> = t
        .subscribers()
        .iter()
        .map(|s| {
            let pos = s.position.load(Ordering::Relaxed);
            json!({
                "id": s.id,
                "kind": s.kind,
                "format": s.format,
                "position": pos,
                "lag": next.saturating_sub(pos),
                "since_ms": s.since_ms,
            })
        })
        .collect();
    let mut v = json!({
        "name": t.name,
        "id": t.id,
        "options": options,
        "first_offset": first,
        "next_offset": next,
        "items": next - first,
        "retained_bytes": t.log.retained_bytes(),
        "items_in": t.stats.items_in.load(Ordering::Relaxed),
        "statements_in": t.stats.statements_in.load(Ordering::Relaxed),
        "bytes_in": t.stats.bytes_in.load(Ordering::Relaxed),
        "items_out": t.stats.items_out.load(Ordering::Relaxed),
        "bytes_out": t.stats.bytes_out.load(Ordering::Relaxed),
        "created_ms": t.created_ms,
        "subscribers": subscribers,
    });
    if let (Some(m), Value::Object(map)) = (&t.mirror, &mut v) {
        map.insert("mirror".into(), m.to_json(Some(next)));
    }
    // A log that refuses appends (a full disk, a failed fsync) says so and why.
    if let (Some(why), Value::Object(map)) = (t.log.failure(), &mut v) {
        map.insert("log_failed".into(), json!(why));
    }
    // Damage a read found in the log's files: the items around it are still served.
    if let (Some(why), Value::Object(map)) = (t.log.damage(), &mut v) {
        map.insert("log_damaged".into(), json!(why));
    }
    v
}

/// The topics the caller may subscribe to (all of them on an open server), and
/// under `unavailable` those of them that could not be opened, with the reason (an
/// operator's view of what needs attention; they answer 503 elsewhere).
pub async fn list(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    _: JsonQuery<NoQuery>,
) -> impl IntoResponse {
    let topics: Vec<Value> = s
        .topics
        .list()
        .iter()
        .filter(|t| caller.allows(Some(&t.name), Right::Subscribe))
        .map(|t| describe_json(t))
        .collect();
    let unavailable: Vec<Value> = s
        .topics
        .unavailable()
        .into_iter()
        .filter(|(name, _)| caller.allows(Some(name), Right::Subscribe))
        .map(|(name, reason)| json!({ "name": name, "reason": reason }))
        .collect();
    Json(json!({ "topics": topics, "unavailable": unavailable }))
}

pub async fn describe(
    State(s): State<AppState>,
    Path(name): Path<String>,
    _: JsonQuery<NoQuery>,
) -> Result<Json<Value>, ApiError> {
    if !crate::topic::valid_name(&name) {
        return Err(crate::topic::TopicError::BadName(name).into());
    }
    s.topics.check_available(&name)?;
    let Some(t) = s.topics.get(&name) else {
        // A mirror that has not reached its upstream yet: say so.
        return Err(match s.topics.mirror(&name) {
            Some(m) => ApiError::not_found(format!(
                "topic `{name}` does not exist yet: its mirror has not reached {}",
                m.upstream_topic_url()
            ))
            .with("topic", name.as_str())
            .with("mirror", m.to_json(None)),
            None => ApiError::unknown_topic(&name),
        });
    };
    Ok(Json(describe_json(&t)))
}

/// Deletes a topic with its log (see [`crate::topic::Registry::delete`]): 200 with
/// the offsets it held, 404 when there is no such topic, 409 for a mirrored topic.
/// Its subscribers' streams end; a later publish of the same name starts a new topic
/// at offset 0.
pub async fn delete(
    State(s): State<AppState>,
    Path(name): Path<String>,
    _: JsonQuery<NoQuery>,
) -> Result<impl IntoResponse, ApiError> {
    let topic = name.clone();
    // Closing the log waits for an append in progress, and the files are removed.
    let gone = blocking(move || s.topics.delete(&topic)).await?;
    Ok(Json(serde_json::json!({
        "topic": name,
        "deleted": true,
        "first_offset": gone.first_offset,
        "next_offset": gone.next_offset,
        "was_unavailable": gone.was_unavailable,
    })))
}

/// Creates a topic. The body is optional JSON options; an empty body takes the
/// server's defaults. 201 when created, 200 when it exists with the same options,
/// 409 when it exists with other options.
pub async fn create(
    State(s): State<AppState>,
    Path(name): Path<String>,
    _: JsonQuery<NoQuery>,
    body: Body,
) -> Result<impl IntoResponse, ApiError> {
    let body = options_body(body, s.config.body_read_timeout()).await?;
    let options = if body.iter().all(|b| b.is_ascii_whitespace()) {
        None
    } else {
        // Fields not given take the server's defaults, as an empty body does.
        let o = TopicOptions::from_json_over(&body, s.topics.defaults())
            .map_err(|e| ApiError::bad_request(format!("bad topic options: {e}")))?;
        Some(o)
    };
    // Its files are made and synced.
    let (t, created) = blocking(move || s.topics.create(&name, options)).await?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(describe_json(&t))))
}

/// Changes a topic's retention (see [`crate::topic::Registry::alter`]): the body is a
/// JSON object of `retention_items`, `retention_bytes` and `retention_ms`. 200 with the
/// topic's description once the change is saved and applied (items beyond the new
/// limits are gone by then); 400 for any other option, which is fixed at creation.
pub async fn alter(
    State(s): State<AppState>,
    Path(name): Path<String>,
    _: JsonQuery<NoQuery>,
    body: Body,
) -> Result<Json<Value>, ApiError> {
    let body = options_body(body, s.config.body_read_timeout()).await?;
    let change = RetentionChange::from_json(&body)
        .map_err(|e| ApiError::bad_request(format!("bad topic options change: {e}")))?;
    // The options file is synced, and retention may delete segments.
    let t = blocking(move || s.topics.alter(&name, &change)).await?;
    Ok(Json(describe_json(&t)))
}

/// The body of a `PUT` or `PATCH` of topic options, up to 64 KiB, within `timeout`
/// (`body_read_timeout_ms`: a client that never sends it holds nothing for ever).
async fn options_body(
    body: Body,
    timeout: Option<std::time::Duration>,
) -> Result<axum::body::Bytes, ApiError> {
    let read = axum::body::to_bytes(body, 64 << 10);
    let read = match timeout {
        Some(t) => tokio::time::timeout(t, read).await.map_err(|_| {
            ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                format!(
                    "the topic options did not arrive within {} ms",
                    t.as_millis()
                ),
            )
        })?,
        None => read.await,
    };
    read.map_err(|e| {
        // Over the limit is 413; anything else (a body that does not decompress, a
        // connection cut) is the request's fault too, but not its size.
        let mut cause: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(&e);
        let mut too_big = false;
        while let Some(c) = cause {
            too_big |= c.is::<http_body_util::LengthLimitError>();
            cause = c.source();
        }
        if too_big {
            ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "topic options over 64 KiB")
        } else {
            ApiError::bad_request(format!("cannot read the topic options: {e}"))
        }
    })
}
