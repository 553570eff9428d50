//! `docs/openapi.yaml` against the router: every route the router serves is
//! documented, every documented operation is served, and the document is coherent
//! (references resolve, errors are JSON).

use std::collections::{BTreeSet, HashSet};

use jelly_server::{Server, ServerConfig};
use serde_json::Value;

const METHODS: [&str; 7] = ["get", "put", "post", "delete", "patch", "head", "options"];

fn openapi() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/openapi.yaml");
    let text = std::fs::read_to_string(path).unwrap();
    // YAML's own value first: it refuses a key given twice in one mapping (a second
    // "503" of an operation), which a JSON value would take silently, keeping the last.
    if let Err(e) = serde_yaml::from_str::<serde_yaml::Value>(&text) {
        panic!("docs/openapi.yaml: {e}");
    }
    serde_yaml::from_str(&text).unwrap()
}

/// `(METHOD, path)` of every `.route("path", get(..).post(..))` in the router's source.
fn routes_in_source() -> BTreeSet<(String, String)> {
    let src = include_str!("../src/http/mod.rs");
    let mut out = BTreeSet::new();
    let mut rest = src;
    while let Some(i) = rest.find(".route(") {
        rest = &rest[i + ".route(".len()..];
        // The call's text, up to its closing parenthesis.
        let (mut depth, mut end, mut in_str) = (1, 0, false);
        for (j, c) in rest.char_indices() {
            match c {
                '"' => in_str = !in_str,
                '(' if !in_str => depth += 1,
                ')' if !in_str => {
                    depth -= 1;
                    if depth == 0 {
                        end = j;
                        break;
                    }
                }
                _ => {}
            }
        }
        let call = &rest[..end];
        let q1 = call.find('"').expect("route path literal");
        let q2 = q1 + 1 + call[q1 + 1..].find('"').unwrap();
        let path = &call[q1 + 1..q2];
        let handlers = &call[q2 + 1..];
        let mut found = false;
        for m in METHODS {
            let pat = format!("{m}(");
            for (k, _) in handlers.match_indices(&pat) {
                let before = handlers[..k].chars().last();
                if before.is_none_or(|c| !(c.is_alphanumeric() || c == '_' || c == ':')) {
                    out.insert((m.to_uppercase(), path.to_string()));
                    found = true;
                }
            }
        }
        assert!(found, "no method found in route {path}: {call}");
        rest = &rest[end..];
    }
    out
}

fn documented(doc: &Value) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for m in METHODS {
            if item.get(m).is_some() {
                out.insert((m.to_uppercase(), path.clone()));
            }
        }
    }
    out
}

/// Follows a local `$ref` (`#/a/b`).
fn resolve<'a>(doc: &'a Value, v: &'a Value) -> &'a Value {
    match v.get("$ref").and_then(Value::as_str) {
        Some(r) => {
            let target = doc
                .pointer(r.strip_prefix('#').expect("local ref"))
                .unwrap_or_else(|| panic!("unresolved $ref {r}"));
            resolve(doc, target)
        }
        None => v,
    }
}

fn check_refs(doc: &Value, v: &Value) {
    match v {
        Value::Object(m) => {
            if let Some(Value::String(r)) = m.get("$ref") {
                resolve(doc, v);
                assert!(r.starts_with("#/"), "{r}");
            }
            m.values().for_each(|x| check_refs(doc, x));
        }
        Value::Array(a) => a.iter().for_each(|x| check_refs(doc, x)),
        _ => {}
    }
}

#[test]
fn every_route_is_documented_and_every_documented_route_exists() {
    let doc = openapi();
    assert_eq!(doc["openapi"], "3.1.0");
    let routes = routes_in_source();
    assert!(routes.len() >= 11, "parsed too few routes: {routes:?}");
    assert!(routes.contains(&("POST".into(), "/topics/{name}/items".into())));
    let docs = documented(&doc);
    let missing: Vec<_> = routes.difference(&docs).collect();
    assert!(
        missing.is_empty(),
        "served but not in openapi.yaml: {missing:?}"
    );
    let stale: Vec<_> = docs.difference(&routes).collect();
    assert!(
        stale.is_empty(),
        "in openapi.yaml but not served: {stale:?}"
    );
}

#[test]
fn the_document_is_coherent() {
    let doc = openapi();
    check_refs(&doc, &doc);
    let mut ids = HashSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        // Path parameters are declared.
        if path.contains("{name}") {
            let params = item["parameters"].as_array().expect("path parameters");
            assert!(
                params
                    .iter()
                    .any(|p| resolve(&doc, p)["in"] == "path" && resolve(&doc, p)["name"] == "name"),
                "{path}: {{name}} not declared"
            );
        }
        for m in METHODS {
            let Some(op) = item.get(m) else { continue };
            let id = op["operationId"].as_str().expect("operationId");
            assert!(ids.insert(id.to_string()), "duplicate operationId {id}");
            let responses = op["responses"].as_object().expect("responses");
            assert!(!responses.is_empty());
            for (status, r) in responses {
                let r = resolve(&doc, r);
                assert!(
                    r["description"].is_string(),
                    "{m} {path} {status}: description"
                );
                let code: u16 = status.parse().unwrap();
                if code >= 400 {
                    assert!(
                        r["content"]["application/json"]["schema"].is_object(),
                        "{m} {path} {status}: errors are JSON"
                    );
                }
            }
        }
    }
}

/// Every documented operation reaches its handler on a running server (not the
/// fallback's 404 "no such endpoint", not 405).
#[tokio::test]
async fn documented_operations_are_served() {
    let srv = Server::start(ServerConfig::ephemeral()).await.unwrap();
    let base = srv.url();
    let c = reqwest::Client::new();
    assert_eq!(
        c.put(format!("{base}/topics/probe"))
            .send()
            .await
            .unwrap()
            .status(),
        201
    );
    for (method, path) in documented(&openapi()) {
        // follow=false so that live subscriptions end.
        let url = format!("{base}{}?follow=false", path.replace("{name}", "probe"));
        let m = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let r = c.request(m, &url).send().await.unwrap();
        let status = r.status();
        let body = r.text().await.unwrap();
        assert_ne!(status, 405, "{method} {path}");
        assert!(
            !body.contains("no such endpoint"),
            "{method} {path}: not routed ({status} {body})"
        );
    }
    srv.shutdown().await.unwrap();
}
