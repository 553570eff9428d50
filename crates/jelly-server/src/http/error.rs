//! Error answers: a status and a JSON body `{"error": "...", ...}`.

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::filter::FilterError;
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
        let err = ApiError::new(status, e.to_string());
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
/// error, naming the parameter, rather than axum's plain-text rejection.
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
        state: &S,
    ) -> Result<Self, Self::Rejection> {
        match axum::extract::Query::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Query(q)) => Ok(JsonQuery(q)),
            Err(e) => {
                let text = e.body_text();
                // axum names the field first: "Failed to deserialize query string:
                // max_items: invalid digit found in string".
                let field = text
                    .split_once("query string: ")
                    .and_then(|(_, rest)| rest.split_once(": "))
                    .map(|(f, _)| f.to_string())
                    .filter(|f| {
                        !f.is_empty() && f.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
                    });
                let mut err = ApiError::bad_request(text);
                if let Some(f) = field {
                    err = err.with("parameter", f);
                }
                Err(err)
            }
        }
    }
}
