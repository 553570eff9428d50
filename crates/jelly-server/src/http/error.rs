//! Error answers: a status and a JSON body `{"error": "...", ...}`.

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use std::collections::BTreeSet;

use crate::filter::{FilterError, FilterParams};
use crate::topic::TopicError;

/// An error answer.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub body: Value,
    /// The request headers the answer depended on (a `Vary` header), for answers
    /// such as a 406 that a cache must not reuse for a request with other headers.
    pub vary: Option<&'static str>,
    /// More headers of the answer (a 426's `Upgrade`).
    pub headers: Vec<(header::HeaderName, &'static str)>,
}

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            body: json!({ "error": message.into() }),
            vary: None,
            headers: Vec::new(),
        }
    }

    /// Adds a header to the answer.
    pub fn with_header(mut self, name: header::HeaderName, value: &'static str) -> ApiError {
        self.headers.push((name, value));
        self
    }

    /// Names the request headers the answer depended on, sent as `Vary`.
    pub fn varying_on(mut self, headers: &'static str) -> ApiError {
        self.vary = Some(headers);
        self
    }

    /// Adds a field to the JSON body.
    pub fn with(mut self, key: &str, value: impl Into<Value>) -> ApiError {
        if let Value::Object(m) = &mut self.body {
            m.insert(key.to_string(), value.into());
        }
        self
    }

    pub fn bad_request(message: impl Into<String>) -> ApiError {
        Self::new(StatusCode::BAD_REQUEST, message)
    }

    pub fn not_found(message: impl Into<String>) -> ApiError {
        Self::new(StatusCode::NOT_FOUND, message)
    }

    pub fn unknown_topic(name: &str) -> ApiError {
        Self::not_found(format!("topic `{name}` does not exist")).with("topic", name)
    }

    /// An offset below the first retained one.
    pub fn gone(requested: u64, first: u64) -> ApiError {
        Self::new(
            StatusCode::GONE,
            format!(
                "offset {requested} is no longer retained; the first retained offset is {first}"
            ),
        )
        .with("first_offset", first)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut r = (self.status, Json(self.body)).into_response();
        if let Some(v) = self.vary {
            r.headers_mut()
                .insert(header::VARY, HeaderValue::from_static(v));
        }
        for (name, value) in self.headers {
            r.headers_mut()
                .insert(name, HeaderValue::from_static(value));
        }
        r
    }
}

impl From<TopicError> for ApiError {
    fn from(e: TopicError) -> ApiError {
        let status = match e {
            TopicError::BadName(_) | TopicError::BadOptions(_) => StatusCode::BAD_REQUEST,
            TopicError::Conflict { .. } | TopicError::Mirrored { .. } => StatusCode::CONFLICT,
            TopicError::NotFound(_) | TopicError::Deleted(_) | TopicError::Replaced { .. } => {
                StatusCode::NOT_FOUND
            }
            TopicError::Storage(_) | TopicError::Unavailable { .. } => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            TopicError::TooMany { .. } => StatusCode::INSUFFICIENT_STORAGE,
        };
        // Named for clients that act on it (`jelly subscribe` waits for a topic that
        // does not exist yet, rather than for an unknown endpoint).
        let topic = match &e {
            TopicError::Unavailable { topic, .. }
            | TopicError::NotFound(topic)
            | TopicError::Deleted(topic)
            | TopicError::Replaced { topic, .. } => Some(topic.clone()),
            _ => None,
        };
        let mut err = ApiError::new(status, e.to_string());
        if e.is_passing() {
            err = err.with_header(header::RETRY_AFTER, "1");
        }
        match topic {
            Some(t) => err.with("topic", t),
            None => err,
        }
    }
}

impl From<FilterError> for ApiError {
    /// A bad filter parameter: 400, with the parameter named in `parameter`.
    fn from(e: FilterError) -> ApiError {
        let parameter = e.parameter();
        let err = ApiError::bad_request(e.to_string());
        match parameter {
            Some(p) => err.with("parameter", p),
            None => err,
        }
    }
}

/// Query parameters as axum's `Query` reads them, but a malformed value (for example
/// `?follow=maybe` or `?max_items=abc`) is answered with a JSON 400 like every other
/// error, naming the parameter, rather than axum's plain-text rejection; and so is a
/// parameter the endpoint does not take (see [`unknown_parameter`]).
#[derive(Debug)]
pub struct JsonQuery<T>(pub T);

impl<T, S> axum::extract::FromRequestParts<S> for JsonQuery<T>
where
    T: serde::de::DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _state: &S,
    ) -> Result<Self, Self::Rejection> {
        let query = parts.uri.query().unwrap_or("");
        let (q, ignored) = read_query::<T>(query)?;
        unknown_parameter(&[ignored])?;
        Ok(JsonQuery(q))
    }
}

/// The query of an endpoint that takes no parameters, for [`JsonQuery`]: any
/// parameter (but `access_token` and names starting with `_`) is refused as unknown,
/// as on the endpoints that take some: `DELETE /topics/t?dry_run=1` must not delete.
#[derive(Debug, Default, serde::Deserialize)]
pub struct NoQuery {}

/// An endpoint's own query parameters and the subscription filters, read from one
/// query string as [`JsonQuery`] reads one kind: a parameter is unknown when
/// neither takes it.
#[derive(Debug)]
pub struct FilteredQuery<T>(pub T, pub FilterParams);

impl<T, S> axum::extract::FromRequestParts<S> for FilteredQuery<T>
where
    T: serde::de::DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _state: &S,
    ) -> Result<Self, Self::Rejection> {
        FilteredQuery::from_query(parts.uri.query().unwrap_or(""))
    }
}

impl<T: serde::de::DeserializeOwned> FilteredQuery<T> {
    /// Reads a query string (without its `?`).
    pub(super) fn from_query(query: &str) -> Result<Self, ApiError> {
        let (q, ignored_by_q) = read_query::<T>(query)?;
        let (f, ignored_by_f) = read_query::<FilterParams>(query)?;
        unknown_parameter(&[ignored_by_q, ignored_by_f])?;
        Ok(FilteredQuery(q, f))
    }
}

/// `T` read from `query`, and the names of the parameters none of its fields took.
fn read_query<T: serde::de::DeserializeOwned>(
    query: &str,
) -> Result<(T, BTreeSet<String>), ApiError> {
    let mut ignored = BTreeSet::new();
    let pairs = serde_urlencoded::Deserializer::new(form_urlencoded::parse(query.as_bytes()));
    // The path of a field: the message of a bad value names the parameter first
    // ("max_items: invalid digit found in string"), as axum's `Query` does.
    let read = serde_path_to_error::deserialize(serde_ignored::Deserializer::new(
        pairs,
        &mut |path: serde_ignored::Path<'_>| {
            ignored.insert(path.to_string());
        },
    ));
    match read {
        Ok(q) => Ok((q, ignored)),
        Err(e) => {
            let field = e.path().to_string();
            // A parameter's name, or "." for an error of the whole query string (a
            // parameter given twice).
            let named = !field.is_empty()
                && field
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_');
            let message = e.inner().to_string();
            // serde's words for a parameter given twice name it only in its message.
            let twice = message
                .strip_prefix("duplicate field `")
                .and_then(|rest| rest.split_once('`'))
                .map(|(name, _)| name.to_string());
            Err(if let Some(name) = twice {
                ApiError::bad_request(format!(
                    "query parameter `{name}` is given more than once; give it once"
                ))
                .with("parameter", name)
            } else if named {
                // The value as given, so that the client sees what was refused.
                let mut value = form_urlencoded::parse(query.as_bytes())
                    .find(|(k, _)| *k == field)
                    .map(|(_, v)| v.into_owned())
                    .unwrap_or_default();
                // A long value is cut: the answer names it, it need not repeat it all.
                if value.len() > 100 {
                    value.truncate(super::prefix_within(&value, 100).len());
                    value.push('…');
                }
                ApiError::bad_request(format!(
                    "query parameter `{field}`: `{value}` is not a valid value ({message})"
                ))
                .with("parameter", field)
            } else {
                ApiError::bad_request(format!("malformed query string: {}", e.inner()))
            })
        }
    }
}

/// The first parameter every reader of the query string left (`ignored`, one set per
/// reader), as a 400 naming it: a misspelled `from` or `max_items` would otherwise
/// change what is served without a word. Kept: `access_token` (read by the
/// authentication layer) and names starting with `_` (cache busters such as `_=1700…`).
fn unknown_parameter(ignored: &[BTreeSet<String>]) -> Result<(), ApiError> {
    let Some((first, rest)) = ignored.split_first() else {
        return Ok(());
    };
    let unknown = first
        .iter()
        .filter(|name| rest.iter().all(|other| other.contains(*name)))
        .find(|name| name.as_str() != "access_token" && !name.starts_with('_'));
    match unknown {
        Some(name) => Err(ApiError::bad_request(format!(
            "unknown query parameter `{name}`: this endpoint does not take it \
             (misspelled? see docs/http-api.md; names starting with `_` are ignored)"
        ))
        .with("parameter", name.as_str())),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only an error that passes by itself tells the client when to retry.
    #[test]
    fn a_topic_being_deleted_answers_503_with_retry_after() {
        let retry_after = |e: &ApiError| {
            e.headers
                .iter()
                .find(|(n, _)| n == header::RETRY_AFTER)
                .map(|(_, v)| *v)
        };
        let unavailable = |reason: &str| TopicError::Unavailable {
            topic: "t".into(),
            reason: reason.into(),
        };
        let going = ApiError::from(unavailable("it is being deleted"));
        assert_eq!(going.status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(retry_after(&going), Some("1"));
        assert_eq!(going.body["topic"], "t");
        let broken = ApiError::from(unavailable("corrupt log segment 0.log at byte 12"));
        assert_eq!(broken.status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(retry_after(&broken), None);
    }
}
