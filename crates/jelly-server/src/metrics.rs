//! Prometheus text exposition (format 0.0.4), written by hand.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use crate::ingest::IngestPaths;
use crate::mirror::MirrorState;
use crate::topic::Registry;

/// A per-topic metric: name, type, help, value.
type PerTopic = (
    &'static str,
    &'static str,
    &'static str,
    fn(&crate::topic::Topic) -> u64,
);

/// Server-wide counters.
#[derive(Debug, Default)]
pub struct Metrics {
    pub requests_publish: AtomicU64,
    pub publish_rejected: AtomicU64,
    pub items_in: AtomicU64,
    pub bytes_in: AtomicU64,
    pub items_out: AtomicU64,
    pub bytes_out: AtomicU64,
    /// Connections accepted (and served).
    pub connections_accepted: AtomicU64,
    /// Connections closed at once: their address had `max_connections_per_ip` open.
    pub connections_refused: AtomicU64,
    /// Connections open now (a gauge).
    pub connections_open: AtomicU64,
    /// Connections closed because a request's head did not arrive in time
    /// (`header_read_timeout_ms`).
    pub connections_timed_out: AtomicU64,
    /// TLS handshakes that failed or timed out.
    pub tls_handshakes_failed: AtomicU64,
    /// The `notAfter` of the server's TLS certificate, in Unix seconds (0: no TLS), for
    /// alerts before it expires (certificates are read at start only).
    pub tls_certificate_not_after: AtomicI64,
    /// Requests refused with 401 / gRPC `UNAUTHENTICATED`.
    pub auth_unauthenticated: AtomicU64,
    /// Requests refused with 403 / gRPC `PERMISSION_DENIED`.
    pub auth_forbidden: AtomicU64,
    /// Live fan-out groups (gauge).
    pub fanout_groups: AtomicU64,
    /// Bytes written (and compressed) once by fan-out groups.
    pub fanout_encoded_bytes: AtomicU64,
    /// Bytes of shared blocks sent to subscribers (counted once per subscriber).
    pub fanout_shared_bytes: AtomicU64,
    /// Times a subscriber lagged out of its group's ring and caught up from the log.
    pub fanout_catchups: AtomicU64,
    /// Published Jelly frames made into items by rebasing ([`IngestPaths::rebased`]).
    pub ingest_rebased: AtomicU64,
    /// Published Jelly frames made into items by re-encoding.
    pub ingest_reencoded: AtomicU64,
}

fn label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

impl Metrics {
    /// Counts `items` and `bytes` delivered to a subscriber of the topic of `stats`, in
    /// its counters and the server's.
    pub fn count_out(&self, stats: &crate::topic::TopicStats, items: u64, bytes: u64) {
        stats.items_out.fetch_add(items, Ordering::Relaxed);
        stats.bytes_out.fetch_add(bytes, Ordering::Relaxed);
        self.items_out.fetch_add(items, Ordering::Relaxed);
        self.bytes_out.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Counts how a publisher's Jelly frames were made into items.
    pub fn count_ingest(&self, paths: IngestPaths) {
        self.ingest_rebased
            .fetch_add(paths.rebased, Ordering::Relaxed);
        self.ingest_reencoded
            .fetch_add(paths.reencoded, Ordering::Relaxed);
    }

    /// Counts a request refused by [`crate::auth`].
    pub fn count_auth_refusal(&self, unauthenticated: bool) {
        let c = if unauthenticated {
            &self.auth_unauthenticated
        } else {
            &self.auth_forbidden
        };
        c.fetch_add(1, Ordering::Relaxed);
    }

    /// Renders all metrics.
    pub fn render(&self, registry: &Registry) -> String {
        let mut s = String::new();
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let counter = |s: &mut String, name: &str, help: &str, v: u64| {
            let _ = writeln!(s, "# HELP {name} {help}\n# TYPE {name} counter\n{name} {v}");
        };
        counter(
            &mut s,
            "jelly_publish_requests_total",
            "Publish requests received.",
            g(&self.requests_publish),
        );
        counter(
            &mut s,
            "jelly_publish_rejected_total",
            "Publish requests refused (atomic: nothing appended; streaming and WebSocket: ended by an error).",
            g(&self.publish_rejected),
        );
        counter(
            &mut s,
            "jelly_items_in_total",
            "Items appended.",
            g(&self.items_in),
        );
        counter(
            &mut s,
            "jelly_bytes_in_total",
            "Bytes of stored item frames appended.",
            g(&self.bytes_in),
        );
        counter(
            &mut s,
            "jelly_ingest_frames_rebased_total",
            "Published Jelly frames made into items by rebasing: kept as sent, with the entries they use from earlier frames in front (counted when the frame is made into an item, also for a request whose append fails afterwards).",
            g(&self.ingest_rebased),
        );
        counter(
            &mut s,
            "jelly_ingest_frames_reencoded_total",
            "Published Jelly frames made into items by decoding and re-encoding: the publisher's options do not fit the topic's, or the frame could not be rebased (counted when the frame is made into an item, also for a request whose append fails afterwards).",
            g(&self.ingest_reencoded),
        );
        counter(
            &mut s,
            "jelly_items_out_total",
            "Items sent to subscribers.",
            g(&self.items_out),
        );
        counter(
            &mut s,
            "jelly_bytes_out_total",
            "Bytes sent to subscribers.",
            g(&self.bytes_out),
        );
        counter(
            &mut s,
            "jelly_connections_accepted_total",
            "Connections accepted.",
            g(&self.connections_accepted),
        );
        counter(
            &mut s,
            "jelly_connections_refused_total",
            "Connections closed at once because their address had max_connections_per_ip open.",
            g(&self.connections_refused),
        );
        counter(
            &mut s,
            "jelly_connections_timed_out_total",
            "Connections closed because a request's head did not arrive within header_read_timeout_ms.",
            g(&self.connections_timed_out),
        );
        let _ = writeln!(
            s,
            "# HELP jelly_connections_open Connections open now.\n# TYPE jelly_connections_open gauge\njelly_connections_open {}",
            g(&self.connections_open)
        );
        counter(
            &mut s,
            "jelly_tls_handshakes_failed_total",
            "TLS handshakes that failed or timed out.",
            g(&self.tls_handshakes_failed),
        );
        let not_after = self.tls_certificate_not_after.load(Ordering::Relaxed);
        if not_after != 0 {
            let name = "jelly_tls_certificate_not_after_seconds";
            let _ = writeln!(
                s,
                "# HELP {name} When the server's TLS certificate expires (its notAfter, Unix seconds; read at start only).\n# TYPE {name} gauge\n{name} {not_after}"
            );
        }
        let name = "jelly_auth_refused_total";
        let _ = writeln!(
            s,
            "# HELP {name} Requests refused by authentication (401, gRPC UNAUTHENTICATED) or authorization (403, PERMISSION_DENIED).\n# TYPE {name} counter\n{name}{{reason=\"unauthenticated\"}} {}\n{name}{{reason=\"forbidden\"}} {}",
            g(&self.auth_unauthenticated),
            g(&self.auth_forbidden)
        );
        let _ = writeln!(
            s,
            "# HELP jelly_fanout_groups Live fan-out groups (subscriptions sharing encoded bytes).\n# TYPE jelly_fanout_groups gauge\njelly_fanout_groups {}",
            g(&self.fanout_groups)
        );
        counter(
            &mut s,
            "jelly_fanout_encoded_bytes_total",
            "Bytes written and compressed once by fan-out groups.",
            g(&self.fanout_encoded_bytes),
        );
        counter(
            &mut s,
            "jelly_fanout_shared_bytes_total",
            "Bytes of shared fan-out blocks sent to subscribers.",
            g(&self.fanout_shared_bytes),
        );
        counter(
            &mut s,
            "jelly_fanout_catchups_total",
            "Times a subscriber lagged out of its group's ring and caught up from the log.",
            g(&self.fanout_catchups),
        );

        let topics = registry.list();
        let per_topic: [PerTopic; 7] = [
            (
                "jelly_topic_items_in_total",
                "counter",
                "Items appended to the topic.",
                |t| t.stats.items_in.load(Ordering::Relaxed),
            ),
            (
                "jelly_topic_bytes_in_total",
                "counter",
                "Bytes of item frames appended to the topic.",
                |t| t.stats.bytes_in.load(Ordering::Relaxed),
            ),
            (
                "jelly_topic_items_out_total",
                "counter",
                "Items sent to the topic's subscribers.",
                |t| t.stats.items_out.load(Ordering::Relaxed),
            ),
            (
                "jelly_topic_bytes_out_total",
                "counter",
                "Bytes sent to the topic's subscribers.",
                |t| t.stats.bytes_out.load(Ordering::Relaxed),
            ),
            (
                "jelly_topic_next_offset",
                "gauge",
                "Offset the next item will get.",
                |t| t.log.next_offset(),
            ),
            (
                "jelly_topic_retained_bytes",
                "gauge",
                "Bytes the topic's log holds (file log: records on disk; memory log: frames and metadata).",
                |t| t.log.retained_bytes(),
            ),
            (
                "jelly_topic_subscribers",
                "gauge",
                "Live subscriptions.",
                |t| t.subscribers().len() as u64,
            ),
        ];
        for (name, kind, help, f) in per_topic {
            let _ = writeln!(s, "# HELP {name} {help}\n# TYPE {name} {kind}");
            for t in &topics {
                let _ = writeln!(s, "{name}{{topic=\"{}\"}} {}", label(&t.name), f(t));
            }
        }
        let name = "jelly_topic_unavailable";
        let _ = writeln!(
            s,
            "# HELP {name} 1 for a topic that could not be opened at startup (a corrupt log); it answers 503.\n# TYPE {name} gauge"
        );
        for t in registry.unavailable().keys() {
            let _ = writeln!(s, "{name}{{topic=\"{}\"}} 1", label(t));
        }
        let name = "jelly_topic_log_failed";
        let _ = writeln!(
            s,
            "# HELP {name} 1 for a topic whose log refuses appends after a failed write or fsync (describe's log_failed says why).\n# TYPE {name} gauge"
        );
        for t in &topics {
            if t.log.failure().is_some() {
                let _ = writeln!(s, "{name}{{topic=\"{}\"}} 1", label(&t.name));
            }
        }
        let name = "jelly_topic_log_damaged";
        let _ = writeln!(
            s,
            "# HELP {name} 1 for a topic whose log a read found damaged since it was opened (describe's log_damaged says where).\n# TYPE {name} gauge"
        );
        for t in &topics {
            if t.log.damage().is_some() {
                let _ = writeln!(s, "{name}{{topic=\"{}\"}} 1", label(&t.name));
            }
        }
        let pool = registry.tail_cache_pool();
        let _ = writeln!(
            s,
            "# HELP jelly_log_tail_cache_bytes Bytes of the newest items the file logs of all topics keep in memory for live readers.\n\
             # TYPE jelly_log_tail_cache_bytes gauge\n\
             jelly_log_tail_cache_bytes {}\n\
             # HELP jelly_log_tail_cache_max_bytes Their bound, max_tail_cache_bytes (0: none).\n\
             # TYPE jelly_log_tail_cache_max_bytes gauge\n\
             jelly_log_tail_cache_max_bytes {}",
            pool.used(),
            pool.max().unwrap_or(0)
        );
        let name = "jelly_subscriber_lag_items";
        let _ = writeln!(
            s,
            "# HELP {name} Items appended but not yet sent to the subscriber.\n# TYPE {name} gauge"
        );
        for t in &topics {
            let next = t.log.next_offset();
            for sub in t.subscribers() {
                let pos = sub.position.load(Ordering::Relaxed);
                let _ = writeln!(
                    s,
                    "{name}{{topic=\"{}\",subscriber=\"{}\",kind=\"{}\",format=\"{}\"}} {}",
                    label(&t.name),
                    sub.id,
                    sub.kind,
                    sub.format,
                    next.saturating_sub(pos)
                );
            }
        }
        render_mirrors(&mut s, registry);
        s
    }
}

/// The mirrors' metrics (one series per mirrored topic).
fn render_mirrors(s: &mut String, registry: &Registry) {
    let mirrors = registry.mirrors();
    if mirrors.is_empty() {
        return;
    }
    type PerMirror = (
        &'static str,
        &'static str,
        &'static str,
        fn(&crate::mirror::MirrorStatus, Option<u64>) -> Option<u64>,
    );
    let per_mirror: [PerMirror; 8] = [
        (
            "jelly_mirror_connected",
            "gauge",
            "1 while the mirror is subscribed to its upstream.",
            |m, _| Some(u64::from(m.state() == MirrorState::Connected)),
        ),
        (
            "jelly_mirror_stopped",
            "gauge",
            "1 when the mirror gave up (the upstream no longer retains what it needs, or other options): needs an operator.",
            |m, _| Some(u64::from(m.state() == MirrorState::Stopped)),
        ),
        (
            "jelly_mirror_refused",
            "gauge",
            "1 while the mirror is retried but its upstream refused it at the last try (401, 403, an untrusted certificate): needs an operator.",
            |m, _| Some(u64::from(m.refused())),
        ),
        (
            "jelly_mirror_upstream_stopped",
            "gauge",
            "1 when the upstream topic is a mirror that stopped, or follows one that did: no new items will come until it is repaired (its description's mirror.upstream_stopped says why).",
            |m, _| Some(u64::from(m.upstream_stopped().is_some())),
        ),
        (
            "jelly_mirror_items_total",
            "counter",
            "Items copied from the upstream.",
            |m, _| Some(m.items.load(Ordering::Relaxed)),
        ),
        (
            "jelly_mirror_connects_total",
            "counter",
            "Subscriptions made to the upstream (1 + reconnections).",
            |m, _| Some(m.connects.load(Ordering::Relaxed)),
        ),
        (
            "jelly_mirror_lag_items",
            "gauge",
            "Items the upstream had when last seen that are not copied yet.",
            |m, next| next.and_then(|n| m.lag(n)),
        ),
        (
            "jelly_mirror_upstream_seen_ms",
            "gauge",
            "When the upstream last answered or sent items (ms since the epoch): the age of the lag.",
            |m, _| m.upstream_seen_ms(),
        ),
    ];
    for (name, kind, help, f) in per_mirror {
        let _ = writeln!(s, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for m in &mirrors {
            let next = registry.get(m.topic()).map(|t| t.log.next_offset());
            if let Some(v) = f(m, next) {
                let _ = writeln!(
                    s,
                    "{name}{{topic=\"{}\",upstream=\"{}\"}} {v}",
                    label(m.topic()),
                    label(&m.upstream_topic_url())
                );
            }
        }
    }
}
