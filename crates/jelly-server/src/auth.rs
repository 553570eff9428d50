//! Bearer tokens with publish, subscribe and admin rights per topic.
//!
//! Without an `[auth]` section the server is open (every request may do anything).
//! With one, every request names its caller: a known token (`Authorization: Bearer
//! <token>`; on WebSocket and SSE routes also `?access_token=<token>`, because
//! browsers cannot set headers there) or, without a token, the anonymous caller, whose
//! rights are `anonymous_subscribe` / `anonymous_publish` (none by default).
//!
//! Answers: a missing, malformed or unknown token where one is needed is
//! `401 Unauthorized` with `WWW-Authenticate: Bearer` (gRPC `UNAUTHENTICATED`); a
//! known token without the right is `403 Forbidden` (gRPC `PERMISSION_DENIED`).
//! Rights are checked before the topic is looked up, so a caller without the right
//! cannot tell whether a topic exists.
//!
//! Tokens are kept only as SHA-256 digests and compared in constant time; they are
//! never logged (a token's `name`, or `token #<n>`, stands for it in messages).
//!
//! Which right each HTTP route needs is in [`need_of`]; routes it does not know need
//! admin, so a route added later is closed until it is given its right there.

use std::path::PathBuf;
use std::sync::Arc;

use axum::extract::{MatchedPath, RawPathParams, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use tonic::Status;
use tonic::metadata::MetadataMap;

use crate::http::{ApiError, AppState};

/// What a request wants to do with a topic (or, for admin, with the server).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Right {
    /// Append items to the topic (and create it on first publish, when allowed).
    Publish,
    /// Read the topic's items and its description.
    Subscribe,
    /// Create topics, list and describe all of them, read `/metrics`; implies
    /// publish and subscribe on every topic.
    Admin,
}

impl Right {
    /// The right's name, as in the configuration.
    pub fn name(self) -> &'static str {
        match self {
            Right::Publish => "publish",
            Right::Subscribe => "subscribe",
            Right::Admin => "admin",
        }
    }
}

/// The `[auth]` section of the configuration.
#[derive(Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuthConfig {
    /// Tokens and their rights.
    pub tokens: Vec<TokenConfig>,
    /// A TOML file with more `tokens = [...]` (kept out of the main configuration).
    pub token_file: Option<PathBuf>,
    /// Topics anyone may subscribe to without a token (patterns).
    pub anonymous_subscribe: Vec<String>,
    /// Topics anyone may publish to without a token (patterns).
    pub anonymous_publish: Vec<String>,
    /// `/metrics` without a token (otherwise it needs admin).
    pub public_metrics: bool,
}

impl std::fmt::Debug for AuthConfig {
    // By hand: the derived form would print the tokens.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthConfig")
            .field("tokens", &self.tokens.len())
            .field("token_file", &self.token_file)
            .field("anonymous_subscribe", &self.anonymous_subscribe)
            .field("anonymous_publish", &self.anonymous_publish)
            .field("public_metrics", &self.public_metrics)
            .finish()
    }
}

/// One token and its rights. Exactly one of `token` and `token_sha256` is given.
#[derive(Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TokenConfig {
    /// A name for messages and logs (the token itself is never shown).
    pub name: Option<String>,
    /// The token in clear.
    pub token: Option<String>,
    /// The SHA-256 of the token, in hex (`printf %s "$TOKEN" | sha256sum`).
    pub token_sha256: Option<String>,
    /// Topic patterns it may publish to.
    pub publish: Vec<String>,
    /// Topic patterns it may subscribe to.
    pub subscribe: Vec<String>,
    /// Every right on every topic, plus topic creation and `/metrics`.
    pub admin: bool,
}

/// The token file: `tokens = [ { ... }, ... ]`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TokenFile {
    #[serde(default)]
    tokens: Vec<TokenConfig>,
}

/// An `[auth]` section that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum AuthConfigError {
    #[error("cannot read the token file {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("token file {path}: {message}")]
    Parse { path: String, message: String },
    #[error("{what}: {message}")]
    Invalid { what: String, message: String },
}

/// A topic pattern: an exact name, or a prefix ending in `*` (`*` alone: any topic).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TopicPattern {
    Exact(String),
    Prefix(String),
}

impl TopicPattern {
    /// Parses a pattern; `*` may only end it.
    pub fn parse(p: &str) -> Result<TopicPattern, String> {
        let (body, prefix) = match p.strip_suffix('*') {
            Some(b) => (b, true),
            None => (p, false),
        };
        if body.contains('*') {
            return Err(format!(
                "topic pattern `{p}`: `*` may only stand at the end (a prefix wildcard)"
            ));
        }
        if !prefix && body.is_empty() {
            return Err("empty topic pattern".into());
        }
        // A pattern no topic name can match is a mistake (`sensors/*` where names use
        // `.`): refused here rather than answering every request with 403.
        if let Some(c) = body.chars().find(|&c| !crate::topic::name_char(c)) {
            return Err(format!(
                "topic pattern `{p}` can never match: topic names hold only ASCII letters, \
                 digits, `.`, `_` and `-`, not `{}`",
                c.escape_default()
            ));
        }
        if body.starts_with('.') || body.len() > crate::topic::MAX_NAME_LEN {
            return Err(format!(
                "topic pattern `{p}` can never match: a topic name does not start with `.` \
                 and has at most {} characters",
                crate::topic::MAX_NAME_LEN
            ));
        }
        Ok(if prefix {
            TopicPattern::Prefix(body.to_string())
        } else {
            TopicPattern::Exact(body.to_string())
        })
    }

    /// True when the topic name matches.
    pub fn matches(&self, topic: &str) -> bool {
        match self {
            TopicPattern::Exact(n) => n == topic,
            TopicPattern::Prefix(p) => topic.starts_with(p.as_str()),
        }
    }
}

/// What one caller may do.
#[derive(Debug, Default)]
pub struct Grants {
    publish: Vec<TopicPattern>,
    subscribe: Vec<TopicPattern>,
    admin: bool,
}

impl Grants {
    fn parse(
        what: &str,
        publish: &[String],
        subscribe: &[String],
        admin: bool,
    ) -> Result<Grants, AuthConfigError> {
        let patterns = |ps: &[String]| {
            ps.iter()
                .map(|p| TopicPattern::parse(p))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|message| AuthConfigError::Invalid {
                    what: what.to_string(),
                    message,
                })
        };
        Ok(Grants {
            publish: patterns(publish)?,
            subscribe: patterns(subscribe)?,
            admin,
        })
    }

    /// True when these grants allow `right` on `topic` (`None`: the server as a whole,
    /// which only admin covers).
    pub fn allows(&self, topic: Option<&str>, right: Right) -> bool {
        if self.admin {
            return true;
        }
        let Some(topic) = topic else {
            return false;
        };
        let patterns = match right {
            Right::Publish => &self.publish,
            Right::Subscribe => &self.subscribe,
            Right::Admin => return false,
        };
        patterns.iter().any(|p| p.matches(topic))
    }

    /// True when these grants hold some subscribe right (or admin).
    pub fn subscribes_somewhere(&self) -> bool {
        self.admin || !self.subscribe.is_empty()
    }
}

/// Who made a request.
#[derive(Debug, Clone)]
pub struct Caller {
    kind: CallerKind,
    grants: Arc<Grants>,
}

#[derive(Debug, Clone)]
enum CallerKind {
    /// The server has no `[auth]`: everything is allowed.
    Open,
    /// No token.
    Anonymous,
    /// A known token, by its label.
    Token(Arc<str>),
}

impl Caller {
    fn open() -> Caller {
        Caller {
            kind: CallerKind::Open,
            grants: Arc::new(Grants {
                admin: true,
                ..Grants::default()
            }),
        }
    }

    /// True when the caller may do `right` on `topic` (`None`: the server).
    pub fn allows(&self, topic: Option<&str>, right: Right) -> bool {
        self.grants.allows(topic, right)
    }

    /// Ok when allowed; otherwise 401 for the anonymous caller (a token might help),
    /// 403 for a token.
    pub fn check(&self, topic: Option<&str>, right: Right) -> Result<(), AuthError> {
        if self.allows(topic, right) {
            return Ok(());
        }
        let topic = topic.map(str::to_string);
        Err(match &self.kind {
            // (An open caller is allowed everything and never gets here.)
            CallerKind::Open | CallerKind::Anonymous => AuthError::MissingToken { right, topic },
            CallerKind::Token(label) => AuthError::Forbidden {
                who: label.to_string(),
                right,
                topic,
            },
        })
    }

    /// The caller's grants (to filter listings).
    pub fn grants(&self) -> &Grants {
        &self.grants
    }
}

/// A refused request.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error(
        "{} needs a bearer token (Authorization: Bearer <token>)",
        scope(*right, topic.as_deref())
    )]
    MissingToken { right: Right, topic: Option<String> },
    #[error("the Authorization header is not `Bearer <token>`")]
    BadHeader,
    #[error("the request has more than one Authorization header")]
    SeveralHeaders,
    #[error("the request has more than one access_token parameter")]
    SeveralQueryTokens,
    #[error("the bearer token is not known")]
    UnknownToken,
    #[error("{who} lacks {}", scope(*right, topic.as_deref()))]
    Forbidden {
        who: String,
        right: Right,
        topic: Option<String>,
    },
}

/// The right a refusal is about, in words.
fn scope(right: Right, topic: Option<&str>) -> String {
    match (right, topic) {
        (Right::Admin, _) => "the admin right".to_string(),
        (r, None) => format!("a {} right", r.name()),
        (r, Some(t)) => format!("the {} right on topic `{t}`", r.name()),
    }
}

impl AuthError {
    /// True for a 401 (authenticate, then try again); false for a 403.
    pub fn is_unauthenticated(&self) -> bool {
        !matches!(self, AuthError::Forbidden { .. })
    }

    /// The gRPC status: `UNAUTHENTICATED` or `PERMISSION_DENIED`.
    pub fn to_status(&self) -> Status {
        if self.is_unauthenticated() {
            Status::unauthenticated(self.to_string())
        } else {
            Status::permission_denied(self.to_string())
        }
    }
}

impl IntoResponse for AuthError {
    fn into_response(self) -> Response {
        // RFC 6750 §3: the challenge, with an error code when a token was sent.
        let challenge = match &self {
            AuthError::MissingToken { .. } => "Bearer realm=\"jellyfish\"",
            AuthError::BadHeader | AuthError::SeveralHeaders | AuthError::SeveralQueryTokens => {
                "Bearer realm=\"jellyfish\", error=\"invalid_request\""
            }
            AuthError::UnknownToken => "Bearer realm=\"jellyfish\", error=\"invalid_token\"",
            AuthError::Forbidden { .. } => {
                "Bearer realm=\"jellyfish\", error=\"insufficient_scope\""
            }
        };
        let status = if self.is_unauthenticated() {
            StatusCode::UNAUTHORIZED
        } else {
            StatusCode::FORBIDDEN
        };
        let mut e = ApiError::new(status, self.to_string());
        if let AuthError::MissingToken { right, topic }
        | AuthError::Forbidden { right, topic, .. } = &self
        {
            e = e.with("right", right.name());
            if let Some(t) = topic {
                e = e.with("topic", t.as_str());
            }
        }
        let mut r = e.into_response();
        r.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static(challenge),
        );
        r
    }
}

/// One known token.
struct TokenEntry {
    digest: [u8; 32],
    label: Arc<str>,
    grants: Arc<Grants>,
}

/// The server's tokens and rights.
pub struct Auth {
    /// `None`: no `[auth]`, an open server.
    rules: Option<Rules>,
    /// The caller of every request to an open server (made once).
    open: Caller,
}

struct Rules {
    tokens: Vec<TokenEntry>,
    anonymous: Arc<Grants>,
    public_metrics: bool,
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.rules {
            None => f.write_str("Auth(open)"),
            Some(r) => write!(f, "Auth({} tokens)", r.tokens.len()),
        }
    }
}

fn sha256(data: &[u8]) -> [u8; 32] {
    let d = ring::digest::digest(&ring::digest::SHA256, data);
    let mut out = [0u8; 32];
    out.copy_from_slice(d.as_ref());
    out
}

/// Equality whose time does not depend on where the inputs differ.
fn constant_time_eq(a: &[u8; 32], b: &[u8; 32]) -> bool {
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

fn parse_hex_digest(hex: &str) -> Option<[u8; 32]> {
    let hex = hex.trim();
    if hex.len() != 64 || !hex.is_ascii() {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

impl Auth {
    /// No authentication: every request may do anything.
    pub fn open() -> Auth {
        Auth {
            rules: None,
            open: Caller::open(),
        }
    }

    /// True when no `[auth]` is configured.
    pub fn is_open(&self) -> bool {
        self.rules.is_none()
    }

    /// Builds the rules of an `[auth]` section (reading its token file, if any).
    pub fn from_config(c: &AuthConfig) -> Result<Auth, AuthConfigError> {
        // Each token with where it was given, for messages: `#N` counts within the
        // inline list or within the token file.
        let mut configs: Vec<(TokenConfig, String)> = c
            .tokens
            .iter()
            .enumerate()
            .map(|(i, t)| (t.clone(), format!("#{} of [auth] tokens", i + 1)))
            .collect();
        if let Some(path) = &c.token_file {
            let p = path.display().to_string();
            let text = std::fs::read_to_string(path).map_err(|source| AuthConfigError::Io {
                path: p.clone(),
                source,
            })?;
            let file: TokenFile = toml::from_str(&text).map_err(|e| AuthConfigError::Parse {
                path: p.clone(),
                message: e.to_string(),
            })?;
            configs.extend(
                file.tokens
                    .into_iter()
                    .enumerate()
                    .map(|(i, t)| (t, format!("#{} of token file {p}", i + 1))),
            );
        }
        let mut tokens: Vec<TokenEntry> = Vec::with_capacity(configs.len());
        for (t, place) in &configs {
            let label: Arc<str> = match &t.name {
                Some(n) => format!("token `{n}`").into(),
                None => format!("token {place}").into(),
            };
            let invalid = |message: &str| AuthConfigError::Invalid {
                what: match &t.name {
                    Some(_) => format!("auth {label} ({place})"),
                    None => format!("auth {label}"),
                },
                message: message.to_string(),
            };
            if let Some(n) = &t.name
                && let Some((_, other)) = configs
                    .iter()
                    .rfind(|(o, p)| o.name.as_deref() == Some(n) && p != place)
            {
                return Err(invalid(&format!(
                    "{other} has the same name (names tell tokens apart in answers and logs)"
                )));
            }
            let digest = match (&t.token, &t.token_sha256) {
                (Some(tok), None) if tok.is_empty() => return Err(invalid("empty token")),
                (Some(tok), None) if !tok.bytes().all(|b| b.is_ascii_graphic()) => {
                    return Err(invalid(
                        "a token must be visible ASCII (it travels in an HTTP header)",
                    ));
                }
                (Some(tok), None) => sha256(tok.as_bytes()),
                (None, Some(h)) => match parse_hex_digest(h) {
                    None => return Err(invalid("token_sha256 must be 64 hex digits")),
                    Some(d) if d == sha256(b"") => {
                        return Err(invalid(
                            "token_sha256 is the digest of the empty token, which no request can present",
                        ));
                    }
                    Some(d) => d,
                },
                (Some(_), Some(_)) => return Err(invalid("give token or token_sha256, not both")),
                (None, None) => return Err(invalid("needs token or token_sha256")),
            };
            if tokens.iter().any(|e| e.digest == digest) {
                return Err(invalid("the same token is given twice"));
            }
            // A token adds to what every caller may do without one: it never has fewer
            // rights than the anonymous caller.
            let publish: Vec<String> = t
                .publish
                .iter()
                .chain(&c.anonymous_publish)
                .cloned()
                .collect();
            let subscribe: Vec<String> = t
                .subscribe
                .iter()
                .chain(&c.anonymous_subscribe)
                .cloned()
                .collect();
            let grants = Grants::parse(&format!("auth {label}"), &publish, &subscribe, t.admin)?;
            tokens.push(TokenEntry {
                digest,
                label,
                grants: Arc::new(grants),
            });
        }
        let anonymous = Grants::parse(
            "auth anonymous rights",
            &c.anonymous_publish,
            &c.anonymous_subscribe,
            false,
        )?;
        if tokens.is_empty() && anonymous.publish.is_empty() && anonymous.subscribe.is_empty() {
            tracing::warn!(
                "auth is on with no tokens and no anonymous rights: every request but /health and /ready is refused"
            );
        } else {
            tracing::info!(
                tokens = tokens.len(),
                anonymous_subscribe = ?c.anonymous_subscribe,
                anonymous_publish = ?c.anonymous_publish,
                "auth: bearer tokens required"
            );
        }
        Ok(Auth {
            rules: Some(Rules {
                tokens,
                anonymous: Arc::new(anonymous),
                public_metrics: c.public_metrics,
            }),
            open: Caller::open(),
        })
    }

    /// The caller of a request that presented `token` (or none).
    pub fn identify(&self, token: Option<&str>) -> Result<Caller, AuthError> {
        let Some(rules) = &self.rules else {
            return Ok(self.open.clone());
        };
        let Some(token) = token else {
            return Ok(Caller {
                kind: CallerKind::Anonymous,
                grants: rules.anonymous.clone(),
            });
        };
        let digest = sha256(token.as_bytes());
        // Every entry is compared, so the time does not say which one matched.
        let mut found = None;
        for e in &rules.tokens {
            if constant_time_eq(&e.digest, &digest) {
                found = Some(e);
            }
        }
        let e = found.ok_or(AuthError::UnknownToken)?;
        Ok(Caller {
            kind: CallerKind::Token(e.label.clone()),
            grants: e.grants.clone(),
        })
    }

    /// The caller of an HTTP request: its `Authorization: Bearer` header, or, where
    /// `query_token` is allowed, its `access_token` query parameter.
    pub fn identify_http(
        &self,
        headers: &HeaderMap,
        query: Option<&str>,
        query_token: bool,
    ) -> Result<Caller, AuthError> {
        if self.is_open() {
            return Ok(self.open.clone());
        }
        // One `Authorization` field only (RFC 9110 §11.6.2): with two, a proxy in front
        // may act on the other one than this server does.
        if headers
            .get_all(header::AUTHORIZATION)
            .iter()
            .nth(1)
            .is_some()
        {
            return Err(AuthError::SeveralHeaders);
        }
        let from_header = match headers.get(header::AUTHORIZATION) {
            None => None,
            Some(v) => Some(bearer(v.to_str().map_err(|_| AuthError::BadHeader)?)?),
        };
        let from_query = if query_token && from_header.is_none() {
            access_token(query)?
        } else {
            None
        };
        self.identify(from_header.or(from_query.as_deref()))
    }

    /// The caller of a gRPC request (metadata `authorization: Bearer <token>`).
    pub fn identify_grpc(&self, md: &MetadataMap) -> Result<Caller, AuthError> {
        if self.is_open() {
            return Ok(self.open.clone());
        }
        if md.get_all("authorization").iter().nth(1).is_some() {
            return Err(AuthError::SeveralHeaders);
        }
        let token = match md.get("authorization") {
            None => None,
            Some(v) => Some(bearer(v.to_str().map_err(|_| AuthError::BadHeader)?)?),
        };
        self.identify(token)
    }
}

/// The token of an `Authorization` value (`Bearer <token>`; the scheme in any case).
fn bearer(value: &str) -> Result<&str, AuthError> {
    let (scheme, token) = value.trim().split_once(' ').ok_or(AuthError::BadHeader)?;
    let token = token.trim();
    if !scheme.eq_ignore_ascii_case("bearer") || token.is_empty() {
        return Err(AuthError::BadHeader);
    }
    Ok(token)
}

/// The `access_token` query parameter, percent-decoded. Given twice, it is refused, as
/// two `Authorization` headers are: which one a proxy in front acted on is not known.
fn access_token(query: Option<&str>) -> Result<Option<String>, AuthError> {
    let Some(query) = query else {
        return Ok(None);
    };
    let mut tokens = form_urlencoded::parse(query.as_bytes())
        .filter(|(k, _)| k == "access_token")
        .map(|(_, v)| v.into_owned());
    let first = tokens.next();
    if tokens.next().is_some() {
        return Err(AuthError::SeveralQueryTokens);
    }
    Ok(first.filter(|t| !t.is_empty()))
}

/// The gRPC status of a refusal, counted in the metrics.
fn grpc_refusal(s: &AppState, e: AuthError) -> Status {
    s.metrics.count_auth_refusal(e.is_unauthenticated());
    e.to_status()
}

/// Checks a gRPC request for `right` on `topic`: the status to answer when refused.
pub fn check_grpc(
    s: &AppState,
    md: &MetadataMap,
    topic: &str,
    right: Right,
) -> Result<Caller, Status> {
    let caller = s.auth.identify_grpc(md).map_err(|e| grpc_refusal(s, e))?;
    check_grpc_caller(s, &caller, topic, right)?;
    Ok(caller)
}

/// Identifies a gRPC caller and checks that it may subscribe to some topic, before
/// the request message that names the topic is read: refused callers are answered at
/// once.
pub fn check_grpc_subscriber(s: &AppState, md: &MetadataMap) -> Result<Caller, Status> {
    let caller = s.auth.identify_grpc(md).map_err(|e| grpc_refusal(s, e))?;
    if !caller.grants().subscribes_somewhere() {
        caller
            .check(None, Right::Subscribe)
            .map_err(|e| grpc_refusal(s, e))?;
    }
    Ok(caller)
}

/// [`check_grpc`] for a caller already identified.
pub fn check_grpc_caller(
    s: &AppState,
    caller: &Caller,
    topic: &str,
    right: Right,
) -> Result<(), Status> {
    caller
        .check(Some(topic), right)
        .map_err(|e| grpc_refusal(s, e))
}

/// Checks an HTTP request for `right` on `topic` (header token only).
pub fn check(
    s: &AppState,
    headers: &HeaderMap,
    topic: &str,
    right: Right,
) -> Result<Caller, AuthError> {
    let caller = s.auth.identify_http(headers, None, false)?;
    caller.check(Some(topic), right)?;
    Ok(caller)
}

/// What an HTTP route needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// Nothing (`/health`, `/ready`).
    Nothing,
    /// A right on the topic named in the path (`{name}`); `query_token`: the token
    /// may come in `?access_token=` (WebSocket and SSE).
    Topic { right: Right, query_token: bool },
    /// Some subscribe right; the handler shows only the topics the caller may read.
    Listing,
    /// Admin (or, for `/metrics` with `public_metrics`, nothing).
    Metrics,
    /// Admin.
    Admin,
    /// Checked by the handler (gRPC: the topic is in the message or metadata).
    Handler,
    /// A method no route of this path takes: the router answers 405 with `Allow`,
    /// which no right would change (rather than a refusal that suggests one would).
    NoSuchMethod,
}

/// The right each route needs. Unknown routes need admin.
pub fn need_of(method: &Method, path: &str) -> Need {
    let read = *method == Method::GET || *method == Method::HEAD;
    let topic = |right, query_token| Need::Topic { right, query_token };
    match path {
        "/health" | "/ready" => Need::Nothing,
        "/metrics" if read => Need::Metrics,
        "/topics" if read => Need::Listing,
        "/topics/{name}" if read => topic(Right::Subscribe, false),
        "/topics/{name}"
            if *method == Method::PUT || *method == Method::PATCH || *method == Method::DELETE =>
        {
            Need::Admin
        }
        "/topics/{name}/items" if read => topic(Right::Subscribe, false),
        "/topics/{name}/items" if *method == Method::POST => topic(Right::Publish, false),
        "/topics/{name}/poll" if read => topic(Right::Subscribe, false),
        "/topics/{name}/sse" if read => topic(Right::Subscribe, true),
        "/topics/{name}/ws" if read => topic(Right::Subscribe, true),
        "/topics/{name}/ws/publish" if read => topic(Right::Publish, true),
        crate::grpc::SUBSCRIBE_PATH | crate::grpc::PUBLISH_PATH => Need::Handler,
        "/metrics"
        | "/topics"
        | "/topics/{name}"
        | "/topics/{name}/items"
        | "/topics/{name}/poll"
        | "/topics/{name}/sse"
        | "/topics/{name}/ws"
        | "/topics/{name}/ws/publish" => Need::NoSuchMethod,
        _ => Need::Admin,
    }
}

/// The axum middleware (a route layer) that enforces [`need_of`] and leaves the
/// [`Caller`] in the request's extensions.
pub async fn guard(State(s): State<AppState>, mut req: Request, next: Next) -> Response {
    if s.auth.is_open() {
        req.extensions_mut().insert(s.auth.open.clone());
        return next.run(req).await;
    }
    let need = match req.extensions().get::<MatchedPath>() {
        Some(p) => need_of(req.method(), p.as_str()),
        None => Need::Admin,
    };
    let refuse = |e: AuthError| {
        s.metrics.count_auth_refusal(e.is_unauthenticated());
        e.into_response()
    };
    let query_token = matches!(
        need,
        Need::Topic {
            query_token: true,
            ..
        }
    );
    let caller = match need {
        Need::Nothing | Need::Handler | Need::NoSuchMethod => None,
        _ => match s
            .auth
            .identify_http(req.headers(), req.uri().query(), query_token)
        {
            Ok(c) => Some(c),
            Err(e) => return refuse(e),
        },
    };
    if let Some(c) = &caller {
        let verdict = match need {
            Need::Topic { right, .. } => {
                let Some(name) = topic_param(&mut req).await else {
                    return ApiError::bad_request("the topic name in the path is not UTF-8")
                        .into_response();
                };
                c.check(Some(&name), right)
            }
            Need::Listing if c.grants().subscribes_somewhere() => Ok(()),
            Need::Listing => c.check(None, Right::Subscribe),
            Need::Metrics if s.auth.rules.as_ref().is_some_and(|r| r.public_metrics) => Ok(()),
            Need::Metrics | Need::Admin => c.check(None, Right::Admin),
            Need::Nothing | Need::Handler | Need::NoSuchMethod => Ok(()),
        };
        if let Err(e) = verdict {
            return refuse(e);
        }
    }
    if let Some(c) = caller {
        req.extensions_mut().insert(c);
    }
    next.run(req).await
}

/// The `{name}` path parameter (percent-decoded, as the handlers see it).
async fn topic_param(req: &mut Request) -> Option<String> {
    use axum::RequestExt as _;
    let params = req.extract_parts::<RawPathParams>().await.ok()?;
    params
        .iter()
        .find(|(k, _)| *k == "name")
        .map(|(_, v)| v.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn auth(toml_text: &str) -> Auth {
        let c: AuthConfig = toml::from_str(toml_text).unwrap();
        Auth::from_config(&c).unwrap()
    }

    #[test]
    fn patterns() {
        let p = TopicPattern::parse("sensors.*").unwrap();
        assert!(p.matches("sensors.a"));
        assert!(p.matches("sensors."));
        assert!(!p.matches("sensor"));
        // Patterns no topic name can match are refused, naming why.
        let e = TopicPattern::parse("sensors/*").unwrap_err();
        assert!(e.contains("never match") && e.contains("`/`"), "{e}");
        assert!(TopicPattern::parse(".hidden").unwrap_err().contains("`.`"));
        assert!(TopicPattern::parse(&"a".repeat(201)).is_err());
        assert!(TopicPattern::parse(&"a".repeat(200)).is_ok());
        assert!(TopicPattern::parse("*").unwrap().matches("anything"));
        let e = TopicPattern::parse("news").unwrap();
        assert!(e.matches("news") && !e.matches("news2"));
        assert!(TopicPattern::parse("a*b").is_err());
        assert!(TopicPattern::parse("**").is_err());
        assert!(TopicPattern::parse("").is_err());
    }

    #[test]
    fn tokens_and_rights() {
        let hash = "2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b"; // "secret"
        let a = auth(&format!(
            r#"
            anonymous_subscribe = ["public.*"]
            [[tokens]]
            token = "pub"
            publish = ["sensors.*", "news"]
            [[tokens]]
            name = "reader"
            token_sha256 = "{hash}"
            subscribe = ["*"]
            [[tokens]]
            token = "root"
            admin = true
            "#
        ));
        let p = a.identify(Some("pub")).unwrap();
        assert!(p.allows(Some("sensors.x"), Right::Publish));
        assert!(p.allows(Some("news"), Right::Publish));
        assert!(!p.allows(Some("news"), Right::Subscribe));
        let e = p.check(Some("news"), Right::Subscribe).unwrap_err();
        assert!(!e.is_unauthenticated());
        assert!(e.to_string().contains("token #1 of [auth] tokens"), "{e}");
        // A token keeps the anonymous rights: it adds to them.
        assert!(p.allows(Some("public.a"), Right::Subscribe));
        let r = a.identify(Some("secret")).unwrap();
        assert!(r.allows(Some("x"), Right::Subscribe));
        assert!(!r.allows(Some("x"), Right::Publish));
        assert!(!r.allows(None, Right::Admin));
        assert!(
            r.check(Some("x"), Right::Publish)
                .unwrap_err()
                .to_string()
                .contains("token `reader`")
        );
        let root = a.identify(Some("root")).unwrap();
        assert!(root.allows(None, Right::Admin) && root.allows(Some("x"), Right::Publish));
        assert!(matches!(
            a.identify(Some("nope")),
            Err(AuthError::UnknownToken)
        ));
        let anon = a.identify(None).unwrap();
        assert!(anon.allows(Some("public.a"), Right::Subscribe));
        let e = anon.check(Some("private"), Right::Subscribe).unwrap_err();
        assert!(e.is_unauthenticated());
        // An open server allows everything, token or not.
        assert!(
            Auth::open()
                .identify(Some("x"))
                .unwrap()
                .allows(None, Right::Admin)
        );
    }

    #[test]
    fn bad_configs_are_refused() {
        let bad = |t: &str| {
            let c: AuthConfig = toml::from_str(t).unwrap();
            Auth::from_config(&c).unwrap_err().to_string()
        };
        assert!(bad("[[tokens]]\npublish = [\"a\"]").contains("needs token"));
        assert!(bad("[[tokens]]\ntoken = \"a\"\ntoken_sha256 = \"00\"").contains("not both"));
        assert!(bad("[[tokens]]\ntoken_sha256 = \"zz\"").contains("64 hex"));
        assert!(bad("[[tokens]]\ntoken = \"a b\"").contains("visible ASCII"));
        assert!(bad("[[tokens]]\ntoken = \"a\"\npublish = [\"x*y\"]").contains("`*`"));
        assert!(bad("[[tokens]]\ntoken = \"a\"\n[[tokens]]\ntoken = \"a\"").contains("twice"));
        // Two tokens of one name could not be told apart.
        let e =
            bad("[[tokens]]\nname = \"n\"\ntoken = \"a\"\n[[tokens]]\nname = \"n\"\ntoken = \"b\"");
        assert!(
            e.contains("#2 of [auth] tokens has the same name")
                && e.contains("#1 of [auth] tokens"),
            "{e}"
        );
        // The digest of the empty token can never be presented.
        let empty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
        assert!(bad(&format!("[[tokens]]\ntoken_sha256 = \"{empty}\"")).contains("empty token"));
        // A bad entry of a token file names the file and the entry's place in it.
        let dir = std::env::temp_dir().join(format!("jelly-auth-file-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("tokens.toml");
        std::fs::write(
            &file,
            "[[tokens]]\ntoken = \"ok\"\n[[tokens]]\ntoken = \"\"\n",
        )
        .unwrap();
        let e = Auth::from_config(&AuthConfig {
            tokens: vec![TokenConfig {
                token: Some("inline".into()),
                ..TokenConfig::default()
            }],
            token_file: Some(file.clone()),
            ..AuthConfig::default()
        })
        .unwrap_err()
        .to_string();
        assert!(
            e.contains(&format!("#2 of token file {}", file.display()))
                && e.contains("empty token"),
            "{e}"
        );
        let _ = std::fs::remove_dir_all(&dir);
        assert!(toml::from_str::<AuthConfig>("tokenz = []").is_err());
    }

    #[test]
    fn example_token_file_is_valid() {
        let text = include_str!("../../../docs/examples/tokens.example.toml");
        let file: TokenFile = toml::from_str(text).unwrap();
        let a = Auth::from_config(&AuthConfig {
            tokens: file.tokens,
            ..AuthConfig::default()
        })
        .unwrap();
        let dashboard = a.identify(Some("change-me-dashboard")).unwrap();
        assert!(dashboard.allows(Some("weather.x"), Right::Subscribe));
        assert!(!dashboard.allows(Some("weather.x"), Right::Publish));
        let stations = a.identify(Some("change-me-stations")).unwrap();
        assert!(stations.allows(Some("weather.x"), Right::Publish));
    }

    #[test]
    fn debug_hides_tokens() {
        let c: AuthConfig = toml::from_str("[[tokens]]\ntoken = \"hunter2\"").unwrap();
        assert!(!format!("{c:?}").contains("hunter2"));
    }

    #[test]
    fn bearer_values() {
        assert_eq!(bearer("Bearer abc").unwrap(), "abc");
        assert_eq!(bearer("bearer  abc ").unwrap(), "abc");
        assert!(bearer("Basic abc").is_err());
        assert!(bearer("Bearer").is_err());
        assert!(bearer("Bearer ").is_err());
        assert_eq!(
            access_token(Some("from=0&access_token=a%2Bb"))
                .unwrap()
                .as_deref(),
            Some("a+b")
        );
        assert_eq!(access_token(Some("from=0")).unwrap(), None);
        assert_eq!(access_token(None).unwrap(), None);
        assert!(matches!(
            access_token(Some("access_token=a&access_token=b")),
            Err(AuthError::SeveralQueryTokens)
        ));
    }

    #[test]
    fn routes_need_rights() {
        assert_eq!(need_of(&Method::GET, "/health"), Need::Nothing);
        assert_eq!(need_of(&Method::GET, "/ready"), Need::Nothing);
        assert_eq!(
            need_of(&Method::POST, "/topics/{name}/items"),
            Need::Topic {
                right: Right::Publish,
                query_token: false
            }
        );
        assert_eq!(need_of(&Method::PUT, "/topics/{name}"), Need::Admin);
        assert_eq!(
            need_of(&Method::GET, "/topics/{name}/new-thing"),
            Need::Admin
        );
        // A method no route of a known path takes: the router's 405.
        assert_eq!(
            need_of(&Method::DELETE, "/topics/{name}/items"),
            Need::NoSuchMethod
        );
    }
}
