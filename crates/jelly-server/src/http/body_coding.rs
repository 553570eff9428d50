//! Request bodies in a content coding (`Content-Encoding`: gzip, deflate, br, zstd)
//! are read decompressed, as a stream: the handlers and their limits see the
//! decompressed bytes, so a small body that inflates past `max_body_bytes` is refused
//! like any large one. A gzip body of several members is read whole (as `gzip -d`
//! does), and bytes after the compressed data are an error rather than ignored.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_compression::tokio::bufread::{BrotliDecoder, GzipDecoder, ZlibDecoder, ZstdDecoder};
use axum::body::Body;
use axum::extract::Request;
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures_util::{StreamExt as _, TryStreamExt as _};
use tokio::io::AsyncRead;
use tokio_util::io::{ReaderStream, StreamReader};

use super::ApiError;

/// The codings a request body may have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyCoding {
    Gzip,
    /// HTTP's `deflate`: zlib data (RFC 9110 §8.4.1.2).
    Deflate,
    Brotli,
    Zstd,
}

impl BodyCoding {
    /// The coding of a `Content-Encoding` value: `None` for the body as it is (no
    /// header, empty, or `identity` only); an error names what cannot be read.
    /// Codings are case-insensitive; `x-gzip` is gzip (RFC 9110 §8.4.1.3).
    ///
    /// ```
    /// use jelly_server::http::body_coding::BodyCoding;
    /// assert_eq!(BodyCoding::of("GZIP, identity"), Ok(Some(BodyCoding::Gzip)));
    /// assert_eq!(BodyCoding::of("identity"), Ok(None));
    /// assert!(BodyCoding::of("gzip, br").is_err());
    /// ```
    pub fn of(value: &str) -> Result<Option<BodyCoding>, String> {
        let mut found = None;
        for c in value.split(',').map(str::trim).filter(|c| !c.is_empty()) {
            let coding = match c.to_ascii_lowercase().as_str() {
                "identity" => continue,
                "gzip" | "x-gzip" => BodyCoding::Gzip,
                "deflate" => BodyCoding::Deflate,
                "br" => BodyCoding::Brotli,
                "zstd" => BodyCoding::Zstd,
                _ => {
                    return Err(format!(
                        "unsupported Content-Encoding `{c}`; use gzip, deflate, br or zstd (or none)"
                    ));
                }
            };
            if found.is_some() {
                return Err(format!(
                    "Content-Encoding `{value}` applies more than one coding; one at most"
                ));
            }
            found = Some(coding);
        }
        Ok(found)
    }

    /// The coding's name in `Content-Encoding`.
    pub fn name(self) -> &'static str {
        match self {
            BodyCoding::Gzip => "gzip",
            BodyCoding::Deflate => "deflate",
            BodyCoding::Brotli => "br",
            BodyCoding::Zstd => "zstd",
        }
    }

    /// The decompressed stream of `body`. A decoding error says where: how many bytes
    /// came out before it, and how far into the body the decoder had read (it reads
    /// ahead, so the fault lies at or before that byte).
    fn decode(self, body: Body) -> Body {
        let read = Arc::new(AtomicU64::new(0));
        let counted = read.clone();
        let reader = StreamReader::new(
            body.into_data_stream()
                .inspect_ok(move |chunk| {
                    counted.fetch_add(chunk.len() as u64, Ordering::Relaxed);
                })
                .map_err(std::io::Error::other),
        );
        let decoder: Pin<Box<dyn AsyncRead + Send>> = match self {
            BodyCoding::Gzip => {
                let mut d = GzipDecoder::new(reader);
                d.multiple_members(true);
                Box::pin(d)
            }
            BodyCoding::Deflate => {
                let mut d = ZlibDecoder::new(reader);
                d.multiple_members(true);
                Box::pin(d)
            }
            BodyCoding::Brotli => {
                let mut d = BrotliDecoder::new(reader);
                d.multiple_members(true);
                Box::pin(d)
            }
            BodyCoding::Zstd => {
                let mut d = ZstdDecoder::new(reader);
                d.multiple_members(true);
                Box::pin(d)
            }
        };
        let mut produced = 0u64;
        Body::from_stream(ReaderStream::new(decoder).map(move |r| match r {
            Ok(chunk) => {
                produced += chunk.len() as u64;
                Ok(chunk)
            }
            Err(e) => Err(std::io::Error::new(
                e.kind(),
                format!(
                    "the {} coding breaks after {produced} decompressed bytes, within the first {} bytes of the body: {e}",
                    self.name(),
                    read.load(Ordering::Relaxed)
                ),
            )),
        }))
    }
}

/// Middleware: decodes the request body of its route (see the module), or answers a
/// JSON 415 for a coding it cannot read.
pub async fn decode_request_body(req: Request, next: Next) -> Response {
    let mut value = String::new();
    for v in req.headers().get_all(header::CONTENT_ENCODING) {
        if !value.is_empty() {
            value.push_str(", ");
        }
        value.push_str(&String::from_utf8_lossy(v.as_bytes()));
    }
    let coding = match BodyCoding::of(&value) {
        Ok(c) => c,
        Err(m) => return ApiError::new(StatusCode::UNSUPPORTED_MEDIA_TYPE, m).into_response(),
    };
    let Some(coding) = coding else {
        return next.run(req).await;
    };
    let (mut parts, body) = req.into_parts();
    parts.headers.remove(header::CONTENT_ENCODING);
    parts.headers.remove(header::CONTENT_LENGTH);
    next.run(Request::from_parts(parts, coding.decode(body)))
        .await
}
