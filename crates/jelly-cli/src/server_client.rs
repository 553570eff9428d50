//! The HTTP client of the verbs that talk to a running `jelly serve` (`publish`,
//! `subscribe`): where its bearer token comes from, and how it is sent.

use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderValue};

use crate::error::{CliError, CliResult};

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
///
/// ```
/// let client = jelly_cli::server_client::client(Some("s3cret")).unwrap();
/// # drop(client);
/// ```
pub fn client(token: Option<&str>) -> CliResult<reqwest::Client> {
    let mut headers = HeaderMap::new();
    if let Some(t) = token {
        let mut v = HeaderValue::from_str(&format!("Bearer {t}")).map_err(|_| {
            CliError::usage("the token holds characters an HTTP header cannot carry")
        })?;
        v.set_sensitive(true);
        headers.insert(AUTHORIZATION, v);
    }
    reqwest::Client::builder()
        .default_headers(headers)
        .build()
        .map_err(|e| CliError::usage(format!("HTTP client: {e}")))
}
