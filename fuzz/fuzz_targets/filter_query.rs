//! Arbitrary text as a subscribe request's query string → the server's reading of it
//! (`serde_urlencoded`, unknown parameters, value limits) and the subscription filter
//! it builds (`source`, `prefix`, `pattern`, SPARQL `ask`), checked on a few items.
//! Properties:
//! - neither panics, hangs or allocates without bound (an `ask` runs on a work budget);
//! - a filter's key is canonical: the parameters it states build a filter of the same
//!   key, which takes and leaves the same items. The `ask` part is left out of the
//!   comparison of keys: spargebra prints an ASK over anything but a basic graph
//!   pattern as a `SELECT` subquery, which prints with one more each time round, so
//!   that text is no fixed point (equal filters can have other keys: they only share
//!   no fan-out group).
#![no_main]

#[path = "common/alloc_limit.rs"]
mod alloc_limit;

use std::sync::{Arc, OnceLock};

use jelly_server::filter::{FilterParams, ItemFilter};
use jelly_server::ingest::{InputFormat, PublishMeta, ingest};
use jelly_server::item::Item;
use jelly_server::topic::TopicOptions;
use libfuzzer_sys::fuzz_target;

/// Items to check filters on: quads with IRIs, literals, blank nodes and graphs, from
/// two sources.
fn items() -> &'static [Item] {
    static ITEMS: OnceLock<Vec<Item>> = OnceLock::new();
    ITEMS.get_or_init(|| {
        let bodies: [&[u8]; 3] = [
            b"<http://ex.org/s> <http://ex.org/p> \"o\"@en <http://ex.org/g> .\n\
              _:b <http://ex.org/p> \"1\"^^<http://www.w3.org/2001/XMLSchema#integer> .\n",
            b"<http://ex.org/a> <http://www.w3.org/1999/02/22-rdf-syntax-ns#type> <http://ex.org/C> .\n\
              <http://ex.org/a> <http://ex.org/q> <http://other.org/b> .\n",
            b"<urn:x> <urn:p> \"x\\ny\" <urn:g> .\n",
        ];
        let mut out = Vec::new();
        for (i, body) in bodies.iter().enumerate() {
            let meta = PublishMeta {
                source: ["sensor-1", "s2", ""][i].to_string(),
                ..PublishMeta::default()
            };
            let made = ingest(body, InputFormat::NQuads, &TopicOptions::default(), &meta, 1 << 20)
                .expect("the fixed items ingest");
            for it in made {
                out.push(Item {
                    offset: out.len() as u64,
                    timestamp_ms: 1_700_000_000_000,
                    frame: it.frame,
                    statements: it.statements,
                    source: it.source,
                    headers: it.headers,
                });
            }
        }
        out
    })
}

/// The parameters a filter's key states.
fn params_of_key(key: &str) -> FilterParams {
    let v: serde_json::Value = serde_json::from_str(key).expect("a filter key is JSON");
    let list = |name: &str, sep: &str| {
        v.get(name).map(|l| {
            l.as_array()
                .expect("a key's list is an array")
                .iter()
                .map(|e| e.as_str().expect("a key's list holds strings"))
                .collect::<Vec<_>>()
                .join(sep)
        })
    };
    let text = |name: &str| {
        v.get(name)
            .map(|t| t.as_str().expect("a key's text").to_string())
    };
    FilterParams {
        source: list("source", ","),
        prefix: list("prefix", " "),
        pattern: text("pattern"),
        ask: text("ask"),
    }
}

/// A key without its `ask` part.
fn without_ask(key: &str) -> serde_json::Value {
    let mut v: serde_json::Value = serde_json::from_str(key).expect("a filter key is JSON");
    if let Some(o) = v.as_object_mut() {
        o.remove("ask");
    }
    v
}

fn verdicts(f: &Arc<ItemFilter>) -> Vec<Option<bool>> {
    items().iter().map(|it| f.accepts(it).ok()).collect()
}

fuzz_target!(|data: &[u8]| {
    let Ok(query) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(Some(filter)) = jelly_server::http::subscribe_filter(query) else {
        return;
    };
    let again = params_of_key(filter.key())
        .build()
        .unwrap_or_else(|e| panic!("the key {} does not build: {e}", filter.key()));
    let again = again.expect("a key states some filter");
    assert_eq!(
        without_ask(again.key()),
        without_ask(filter.key()),
        "the key is not canonical"
    );
    assert_eq!(
        verdicts(&again),
        verdicts(&filter),
        "the key's filter takes other items"
    );
});
