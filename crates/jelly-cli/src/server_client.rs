//! The HTTP client of the verbs that talk to a running `jelly serve` (`publish`,
//! `subscribe`): where its bearer token comes from, how it is sent, and which
//! certificate authorities an `https://` server may be signed by.

use std::path::Path;

use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderValue};

use crate::error::{CliError, CliResult};

/// Checks a `--server` value: an `http://` or `https://` URL with a host and no query
/// or fragment (a path is kept, for a server behind a proxy under a prefix). Used as
/// the flag's value parser, so that a typo is a usage error at once rather than a
/// connection that can never be made (and that `subscribe` would retry).
///
/// ```
/// use jelly_cli::server_client::server_url;
/// assert_eq!(server_url("http://127.0.0.1:8686/").unwrap(), "http://127.0.0.1:8686");
/// assert_eq!(server_url("https://h.example/jelly").unwrap(), "https://h.example/jelly");
/// assert!(server_url("127.0.0.1:8686").unwrap_err().contains("http://"));
/// assert!(server_url("localhost:8686").unwrap_err().contains("did you mean http://localhost:8686"));
/// assert!(server_url("ftp://h.example").is_err());
/// assert!(server_url("http://h.example/?a=1").is_err());
/// ```
pub fn server_url(s: &str) -> Result<String, String> {
    // `host:port` without a scheme parses as a URL of scheme `host` (or not at all).
    let hint = if s.contains("://") {
        String::new()
    } else {
        format!(" (did you mean http://{s}?)")
    };
    let url = reqwest::Url::parse(s).map_err(|e| format!("`{s}` is not a URL: {e}{hint}"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!(
            "`{s}`: the server is reached over http:// or https://, not {}:{hint}",
            url.scheme()
        ));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(format!("`{s}` names no host"));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(format!(
            "`{s}`: give the server's address without a query or fragment"
        ));
    }
    Ok(s.trim_end_matches('/').to_string())
}

/// The environment variable read when `--token` is not given.
pub const TOKEN_ENV: &str = "JELLY_TOKEN";

/// The token to send: `--token`, else `$JELLY_TOKEN` (an empty value counts as none).
///
/// ```
/// use jelly_cli::server_client::token;
/// assert_eq!(token(Some("s3cret")).as_deref(), Some("s3cret"));
/// ```
pub fn token(flag: Option<&str>) -> Option<String> {
    flag.map(str::to_string)
        .or_else(|| std::env::var(TOKEN_ENV).ok())
        .filter(|t| !t.is_empty())
}

/// A client that sends `Authorization: Bearer <token>` with every request when a
/// token is given (the header is marked sensitive, so it never shows in debug output).
/// `https://` servers are checked against the system's roots, and also against the
/// certificates of `cacert` (a PEM file) when given.
///
/// ```
/// let client = jelly_cli::server_client::client(Some("s3cret"), None).unwrap();
/// # drop(client);
/// ```
pub fn client(token: Option<&str>, cacert: Option<&Path>) -> CliResult<reqwest::Client> {
    build_client(token, cacert, reqwest::redirect::Policy::default())
}

/// [`client`] for requests that send data (`jelly publish`): a redirect is followed
/// only when it keeps the method and body (307, 308). A 301, 302 or 303 would turn
/// the POST into a GET without its body, and the data would be silently lost (or the
/// GET would be a live subscription that never ends); it is reported instead.
pub fn write_client(token: Option<&str>, cacert: Option<&Path>) -> CliResult<reqwest::Client> {
    let policy = reqwest::redirect::Policy::custom(|attempt| {
        if attempt.previous().len() >= 10 {
            attempt.error("too many redirects")
        } else if matches!(attempt.status().as_u16(), 307 | 308) {
            attempt.follow()
        } else {
            attempt.stop()
        }
    });
    build_client(token, cacert, policy)
}

fn build_client(
    token: Option<&str>,
    cacert: Option<&Path>,
    redirects: reqwest::redirect::Policy,
) -> CliResult<reqwest::Client> {
    jelly_server::tls::install_crypto_provider();
    let mut headers = HeaderMap::new();
    if let Some(t) = token {
        // The server takes visible ASCII only (as its token files do): anything else
        // would be sent as raw bytes and refused there as a malformed header.
        if !t.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(CliError::usage(
                "the token must be visible ASCII (no spaces, control or non-ASCII characters)",
            ));
        }
        let mut v = HeaderValue::from_str(&format!("Bearer {t}")).map_err(|_| {
            CliError::usage("the token holds characters an HTTP header cannot carry")
        })?;
        v.set_sensitive(true);
        headers.insert(AUTHORIZATION, v);
    }
    // A server that does not accept the connection within this is reported, not
    // waited for (an answer may take long: a big publish, a subscription).
    let mut b = reqwest::Client::builder()
        .default_headers(headers)
        .redirect(redirects)
        .connect_timeout(std::time::Duration::from_secs(10));
    if let Some(path) = cacert {
        let name = path.display().to_string();
        let pem = std::fs::read(path).map_err(|e| CliError::io(&name, &e))?;
        let certs = jelly_server::tls::root_certificates(&pem)
            .map_err(|e| CliError::usage(format!("{name}: {e}")))?;
        for c in certs {
            b = b.add_root_certificate(c);
        }
    }
    b.build()
        .map_err(|e| CliError::usage(format!("HTTP client: {e}")))
}

/// Sends `req` to `server` and reads the whole answer: its status and body text. A
/// server that cannot be reached, or whose answer breaks off, is a usage error (exit 2).
/// Checks a topic name before it goes into a URL: a name with `/`, `?` or spaces
/// would reach another endpoint or add query parameters.
pub fn check_topic(topic: &str) -> CliResult {
    if jelly_server::topic::valid_name(topic) {
        Ok(())
    } else {
        Err(CliError::usage(
            jelly_server::topic::TopicError::BadName(topic.to_string()).to_string(),
        ))
    }
}

/// A line on stdout; a closed pipe (`| head`) or a full disk is reported, not a panic.
pub fn print_line(text: &str) -> CliResult {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{text}")
        .and_then(|()| out.flush())
        .map_err(|e| CliError::io("<stdout>", &e))
}

pub async fn send(
    req: reqwest::RequestBuilder,
    server: &str,
) -> CliResult<(reqwest::StatusCode, String)> {
    // "Cannot reach" only when no connection was made: a request cut later may have
    // been (partly) taken, and the message says so.
    let failed = |e: reqwest::Error| {
        let what = if e.is_connect() {
            format!("cannot reach {server}")
        } else if e.is_timeout() {
            format!("{server} did not answer in time")
        } else {
            format!("the request to {server} broke off before its answer")
        };
        // As `jelly subscribe` says: the usual cause is a server with a private CA.
        let hint = if jelly_server::tls::is_certificate_error(&e) {
            " (a server with a private CA needs --cacert naming it; a --cacert given does not sign this certificate)"
        } else {
            ""
        };
        CliError::usage(format!("{what}: {}{hint}", describe(&e)))
    };
    let resp = req.send().await.map_err(failed)?;
    let status = resp.status();
    let text = resp.text().await.map_err(failed)?;
    Ok((status, text))
}

/// The reason in a server's refusal: the `error` of its JSON answer, or the text as
/// it came.
///
/// ```
/// use jelly_cli::server_client::refusal_message;
/// assert_eq!(refusal_message(r#"{"error": "no such topic"}"#), "no such topic");
/// assert_eq!(refusal_message("Bad Gateway"), "Bad Gateway");
/// ```
pub fn refusal_message(text: &str) -> String {
    serde_json::from_str::<serde_json::Value>(text)
        .ok()
        .and_then(|v| v["error"].as_str().map(str::to_string))
        .unwrap_or_else(|| text.to_string())
}

/// The error of a request about `what` that the server answered with `status` (not a
/// success) and `text`: a 4xx is a refusal of what was asked (exit 1), a 5xx a server
/// that cannot take it now (unavailable, out of topics or storage: exit 2, like a
/// server that cannot be reached).
///
/// ```
/// use jelly_cli::server_client::refused;
/// let e = refused("t", reqwest::StatusCode::NOT_FOUND, r#"{"error": "no such topic"}"#);
/// assert_eq!((e.code, e.message.as_str()), (1, "t: the server refused it (404 Not Found): no such topic"));
/// assert_eq!(refused("t", reqwest::StatusCode::INSUFFICIENT_STORAGE, "").code, 2);
/// ```
pub fn refused(what: &str, status: reqwest::StatusCode, text: &str) -> CliError {
    let msg = format!(
        "{what}: the server refused it ({status}): {}",
        refusal_message(text)
    );
    if status.is_client_error() {
        CliError::invalid(msg)
    } else {
        CliError::usage(msg)
    }
}

/// An HTTP error with its causes (see [`jelly_server::mirror::describe`]), and a hint
/// when it looks like `https://` given for a plain HTTP server.
pub fn describe(e: &reqwest::Error) -> String {
    let text = jelly_server::mirror::describe(e);
    // rustls' words for a server that answered a ClientHello with plain HTTP.
    if text.contains("InvalidContentType") {
        return format!("{text} (is the server plain http://?)");
    }
    text
}
