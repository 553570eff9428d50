//! `GET /health` (liveness) and `GET /ready` (readiness).
//!
//! A server that answers is alive, so `/health` is always 200; its `status` says
//! `degraded` when part of what it holds is not served as it should be until an
//! operator acts: a topic that could not be opened, a log that refuses appends (a
//! full disk, a failed fsync), a log whose files a read found damaged, a mirror that
//! stopped. `/ready` answers 503 then, so that a load balancer or an
//! orchestrator's probe can act on it without reading a body, and lists the reasons.
//!
//! A mirror whose upstream is a mirror that stopped is counted, not a problem: this
//! server serves what it has, and the stopped mirror is reported on its own server.
//! Counting it would take every server of a chain out of rotation for one stop.

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::{ApiError, AppState};
use crate::auth::Right;
use crate::mirror::MirrorState;

/// One thing, on one topic, that needs an operator.
struct Problem {
    topic: String,
    /// `unavailable`, `log_failed`, `log_damaged`, `mirror_stopped` or `mirror_refused`.
    kind: &'static str,
    reason: String,
}

/// What the server holds and what of it needs an operator.
struct Health {
    topics: usize,
    /// Every unavailable name ([`crate::topic::Registry::unavailable`]), deletions in
    /// progress included.
    unavailable: usize,
    mirrors: usize,
    /// Mirrors whose upstream is a mirror that stopped (further up a chain): they
    /// serve what they have, but nothing new will come.
    mirrors_upstream_stopped: usize,
    problems: Vec<Problem>,
}

impl Health {
    fn of(s: &AppState) -> Health {
        let topics = s.topics.list();
        let mirrors = s.topics.mirrors();
        let mut problems: Vec<Problem> = s
            .topics
            .unavailable_lasting()
            .into_iter()
            .map(|(topic, reason)| Problem {
                topic,
                kind: "unavailable",
                reason,
            })
            .collect();
        problems.extend(topics.iter().filter_map(|t| {
            t.log.failure().map(|reason| Problem {
                topic: t.name.clone(),
                kind: "log_failed",
                reason,
            })
        }));
        problems.extend(topics.iter().filter_map(|t| {
            t.log.damage().map(|reason| Problem {
                topic: t.name.clone(),
                kind: "log_damaged",
                reason,
            })
        }));
        // A mirror that stopped, or one retried but refused by its upstream (its
        // token, or a certificate this server does not trust): only an operator
        // changes either.
        problems.extend(mirrors.iter().filter_map(|m| {
            let kind = if m.state() == MirrorState::Stopped {
                "mirror_stopped"
            } else if m.refused() {
                "mirror_refused"
            } else {
                return None;
            };
            Some(Problem {
                topic: m.topic().to_string(),
                kind,
                reason: m.last_error().map(|(e, _)| e).unwrap_or_default(),
            })
        }));
        Health {
            topics: topics.len(),
            unavailable: s.topics.unavailable().len(),
            mirrors: mirrors.len(),
            mirrors_upstream_stopped: mirrors
                .iter()
                .filter(|m| m.upstream_stopped().is_some())
                .count(),
            problems,
        }
    }

    fn count(&self, kind: &str) -> usize {
        self.problems.iter().filter(|p| p.kind == kind).count()
    }

    fn status(&self) -> &'static str {
        if self.problems.is_empty() {
            "ok"
        } else {
            "degraded"
        }
    }

    /// "1 topic unavailable, 2 mirrors stopped", for the 503's `error`.
    fn summary(&self) -> String {
        let parts: Vec<String> = [
            ("unavailable", "topic unavailable", "topics unavailable"),
            (
                "log_failed",
                "log refusing appends",
                "logs refusing appends",
            ),
            ("log_damaged", "log found damaged", "logs found damaged"),
            ("mirror_stopped", "mirror stopped", "mirrors stopped"),
            (
                "mirror_refused",
                "mirror refused by its upstream",
                "mirrors refused by their upstreams",
            ),
        ]
        .into_iter()
        .filter_map(|(kind, one, many)| match self.count(kind) {
            0 => None,
            1 => Some(format!("1 {one}")),
            n => Some(format!("{n} {many}")),
        })
        .collect();
        parts.join(", ")
    }
}

/// Liveness: 200 whenever the server answers, with the topics served, those that
/// could not be opened (they count towards `max_topics` too, so the two add up to
/// what that limit sees), logs that refuse appends and mirrors that stopped; `status`
/// is `degraded` when any of the last three needs an operator.
pub async fn health(State(s): State<AppState>) -> impl IntoResponse {
    let h = Health::of(&s);
    Json(json!({
        "status": h.status(),
        "topics": h.topics,
        "unavailable": h.unavailable,
        "log_failed": h.count("log_failed"),
        "log_damaged": h.count("log_damaged"),
        "mirrors": h.mirrors,
        "mirrors_stopped": h.count("mirror_stopped"),
        "mirrors_refused": h.count("mirror_refused"),
        "mirrors_upstream_stopped": h.mirrors_upstream_stopped,
    }))
}

/// Readiness: 200 while nothing needs an operator, else 503 with the reasons.
///
/// Open to every caller, like `/health` (probes carry no tokens). The counts cover
/// every topic; `problems` names only the topics the caller may subscribe to (all of
/// them on an open server), as `GET /topics` does, since reasons name files and
/// upstreams. A token that is not known shows what no token shows, rather than a
/// 401 a probe would take for "not ready".
pub async fn ready(State(s): State<AppState>, headers: HeaderMap) -> Response {
    let h = Health::of(&s);
    if h.problems.is_empty() {
        return Json(json!({ "status": "ok" })).into_response();
    }
    let caller = s.auth.identify_http(&headers, None, false).ok();
    let shown: Vec<Value> = h
        .problems
        .iter()
        .filter(|p| {
            caller
                .as_ref()
                .is_some_and(|c| c.allows(Some(&p.topic), Right::Subscribe))
        })
        .map(|p| json!({ "topic": p.topic, "kind": p.kind, "reason": p.reason }))
        .collect();
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        format!("degraded: {}", h.summary()),
    )
    .with("status", "degraded")
    .with("unavailable", h.count("unavailable"))
    .with("log_failed", h.count("log_failed"))
    .with("log_damaged", h.count("log_damaged"))
    .with("mirrors_stopped", h.count("mirror_stopped"))
    .with("mirrors_refused", h.count("mirror_refused"))
    .with("problems", shown)
    .into_response()
}
