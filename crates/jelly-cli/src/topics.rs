//! `jelly topics`: list, describe, create, alter and delete the topics of a running
//! server.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use serde_json::Value;

use crate::error::{CliError, CliResult};

/// The exit codes of every `jelly topics` verb (a literal, for `concat!`).
macro_rules! exit_codes {
    () => {
        "Exit codes: 0 done, 1 refused by the server (a 4xx answer: unknown topic,\n\
         conflicting options, no right), 2 usage error, the server cannot be reached or\n\
         cannot take it now (a 5xx answer: unavailable, out of topics or storage)."
    };
}

/// The after-help of `jelly topics`: examples, what each verb does, exit codes.
pub const TOPICS_HELP: &str = concat!(
    "\
Examples:
  jelly topics list
  jelly topics describe weather
  jelly topics create readings --options '{\"physical\":\"triples\",\"retention_ms\":86400000}'
  jelly topics alter readings --retention-ms 3600000 --retention-bytes 0
  jelly topics delete readings

`list` prints one line per topic (name, retained offsets, items, subscribers); add
--json for the server's JSON. `describe` and `create` print the topic's description as
JSON. `alter` changes a topic's retention (0 bytes or ms: no limit); items beyond the
new limits are gone when it returns, and the change holds across restarts. The other
options are fixed when a topic is created. `delete` removes the topic and its log; its
subscribers' streams end, and a later publish of the same name starts a new topic at
offset 0. Creating, altering and deleting need the admin right on a server with tokens.

",
    exit_codes!()
);

#[derive(Debug, Args)]
pub struct TopicsArgs {
    #[command(subcommand)]
    pub command: TopicsCommand,
    #[command(flatten)]
    pub server: ServerArgs,
}

/// Where the server is and how to reach it.
#[derive(Debug, Args)]
pub struct ServerArgs {
    /// Server URL.
    #[arg(
        long,
        global = true,
        default_value = "http://127.0.0.1:8686",
        value_name = "URL",
        value_parser = crate::server_client::server_url
    )]
    pub server: String,
    /// Bearer token for a server with `[auth]` (default: the JELLY_TOKEN environment
    /// variable).
    #[arg(long, global = true, value_name = "TOKEN")]
    pub token: Option<String>,
    /// PEM file of the certificate authorities to trust for an `https://` server, in
    /// addition to the system's.
    #[arg(long, global = true, value_name = "FILE")]
    pub cacert: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum TopicsCommand {
    /// List the topics (those the caller may subscribe to).
    #[command(after_help = concat!(
        "Examples:\n  jelly topics list\n  jelly topics list --json --server https://jelly.example.org\n\n",
        exit_codes!()
    ))]
    List {
        /// Print the server's JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Describe a topic: options, offsets, counters, subscribers (JSON).
    #[command(after_help = concat!("Example:\n  jelly topics describe weather\n\n", exit_codes!()))]
    Describe {
        /// The topic.
        topic: String,
    },
    /// Create a topic (admin); succeeds if it exists with the same options.
    #[command(after_help = concat!(
        "Example:\n  jelly topics create readings --options '{\"physical\":\"triples\",\"retention_ms\":86400000}'\n\n",
        exit_codes!()
    ))]
    Create {
        /// The topic.
        topic: String,
        /// Its options as JSON, e.g. `{"physical":"triples","retention_bytes":1000000}`
        /// (default: the server's `[topic_defaults]`).
        #[arg(long, value_name = "JSON")]
        options: Option<String>,
    },
    /// Change a topic's retention (admin); prints its new description (JSON).
    #[command(after_help = concat!(
        "Example:\n  jelly topics alter readings --retention-ms 3600000 --retention-bytes 0\n\n\
         Items beyond the new limits are gone when it returns; the change holds across\n\
         restarts. The other options are fixed when a topic is created.\n\n",
        exit_codes!()
    ))]
    Alter {
        /// The topic.
        topic: String,
        /// Keep at most this many items (memory log).
        #[arg(long, value_name = "N")]
        retention_items: Option<u64>,
        /// Keep at most about this many bytes (0: no limit; a new topic's default is 0
        /// with the file log, 256 MiB with the memory log).
        #[arg(long, value_name = "BYTES")]
        retention_bytes: Option<u64>,
        /// Drop items older than this many milliseconds (0: no limit).
        #[arg(long, value_name = "MS")]
        retention_ms: Option<u64>,
    },
    /// Delete a topic and its log (admin).
    #[command(after_help = concat!(
        "Example:\n  jelly topics delete readings\n\n\
         Its subscribers' streams end, and a later publish of the same name starts a new\n\
         topic at offset 0.\n\n",
        exit_codes!()
    ))]
    Delete {
        /// The topic.
        topic: String,
    },
}

/// One request to the server: the status and the body as JSON (or the text).
fn call(
    a: &ServerArgs,
    method: reqwest::Method,
    path: &str,
    body: Option<String>,
) -> CliResult<(reqwest::StatusCode, String)> {
    let token = crate::server_client::token(a.token.as_deref());
    // A create, alter or delete redirected by a 301, 302 or 303 would go on as a GET:
    // reported as the redirect it is, not printed as if the change was made.
    let client = if method == reqwest::Method::GET {
        crate::server_client::client(token.as_deref(), a.cacert.as_deref())?
    } else {
        crate::server_client::write_client(token.as_deref(), a.cacert.as_deref())?
    };
    let url = format!("{}{path}", a.server.trim_end_matches('/'));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::io("tokio runtime", &e))?;
    let mut req = client.request(method, &url);
    if let Some(b) = body {
        req = req.header("content-type", "application/json").body(b);
    }
    rt.block_on(crate::server_client::send(req, &a.server))
}

/// The body of a successful answer as JSON, or the server's refusal as an error.
fn expect_success(what: &str, (status, text): (reqwest::StatusCode, String)) -> CliResult<Value> {
    if status.is_success() {
        return Ok(serde_json::from_str(&text).unwrap_or(Value::String(text)));
    }
    Err(crate::server_client::refused(what, status, &text))
}

/// The path of a topic, with its name checked first: a name with `/` or `?` would
/// reach another endpoint.
fn topic_path(topic: &str) -> CliResult<String> {
    crate::server_client::check_topic(topic)?;
    Ok(format!("/topics/{topic}"))
}

use crate::server_client::print_line;

fn print_json(v: &Value) -> CliResult {
    let text = serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string());
    print_line(&text)
}

/// `list` as a table: name, first and next offset, items, subscribers.
fn table(v: &Value) -> String {
    let topics = v["topics"].as_array().cloned().unwrap_or_default();
    let rows: Vec<[String; 5]> = topics
        .iter()
        .map(|t| {
            let n = |k: &str| t[k].as_u64().map_or_else(|| "-".into(), |x| x.to_string());
            let subs = t["subscribers"].as_array().map_or(0, Vec::len);
            [
                t["name"].as_str().unwrap_or("?").to_string(),
                n("first_offset"),
                n("next_offset"),
                n("items"),
                subs.to_string(),
            ]
        })
        .collect();
    let head = ["TOPIC", "FIRST", "NEXT", "ITEMS", "SUBSCRIBERS"].map(String::from);
    let mut width = head.clone().map(|h| h.len());
    for r in &rows {
        for (w, c) in width.iter_mut().zip(r) {
            *w = (*w).max(c.len());
        }
    }
    let mut out = String::new();
    for r in std::iter::once(&head).chain(&rows) {
        let line: Vec<String> = r
            .iter()
            .zip(width)
            .enumerate()
            .map(|(i, (c, w))| {
                if i == 0 {
                    format!("{c:<w$}")
                } else {
                    format!("{c:>w$}")
                }
            })
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }
    // Topics that could not be opened: below the table, each with its reason.
    for u in v["unavailable"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "{}  UNAVAILABLE: {}\n",
            u["name"].as_str().unwrap_or("?"),
            u["reason"].as_str().unwrap_or("")
        ));
    }
    out
}

/// The offsets a topic holds, from an answer with `first_offset` and `next_offset`.
fn held(v: &Value) -> String {
    match (v["first_offset"].as_u64(), v["next_offset"].as_u64()) {
        (Some(first), Some(next)) if next > first => {
            format!("offsets {first} to {}", next - 1)
        }
        _ => "no items".into(),
    }
}

pub fn run(a: &TopicsArgs, quiet: bool) -> CliResult {
    let s = &a.server;
    match &a.command {
        TopicsCommand::List { json } => {
            let v = expect_success("list", call(s, reqwest::Method::GET, "/topics", None)?)?;
            if *json {
                print_json(&v)
            } else {
                print_line(table(&v).trim_end())
            }
        }
        TopicsCommand::Describe { topic } => {
            let path = topic_path(topic)?;
            let v = expect_success(topic, call(s, reqwest::Method::GET, &path, None)?)?;
            print_json(&v)
        }
        TopicsCommand::Create { topic, options } => {
            let path = topic_path(topic)?;
            if let Some(o) = options {
                serde_json::from_str::<Value>(o)
                    .map_err(|e| CliError::usage(format!("--options is not JSON: {e}")))?;
            }
            let (status, body) = call(s, reqwest::Method::PUT, &path, options.clone())?;
            let created = status == reqwest::StatusCode::CREATED;
            let v = expect_success(topic, (status, body))?;
            print_json(&v)?;
            if !quiet {
                let what = if created {
                    "created"
                } else {
                    "exists with these options"
                };
                eprintln!("jelly topics: `{topic}` {what}");
            }
            Ok(())
        }
        TopicsCommand::Alter {
            topic,
            retention_items,
            retention_bytes,
            retention_ms,
        } => {
            let path = topic_path(topic)?;
            let mut change = serde_json::Map::new();
            for (key, value) in [
                ("retention_items", retention_items),
                ("retention_bytes", retention_bytes),
                ("retention_ms", retention_ms),
            ] {
                if let Some(v) = value {
                    change.insert(key.into(), (*v).into());
                }
            }
            if change.is_empty() {
                return Err(CliError::usage(
                    "nothing to change: give --retention-items, --retention-bytes or --retention-ms",
                ));
            }
            let body = Value::Object(change).to_string();
            let v = expect_success(topic, call(s, reqwest::Method::PATCH, &path, Some(body))?)?;
            print_json(&v)?;
            if !quiet {
                eprintln!("jelly topics: `{topic}` changed; it holds {}", held(&v));
            }
            Ok(())
        }
        TopicsCommand::Delete { topic } => {
            let path = topic_path(topic)?;
            let v = expect_success(topic, call(s, reqwest::Method::DELETE, &path, None)?)?;
            print_json(&v)?;
            if !quiet {
                if v["was_unavailable"] == true {
                    // Its log could not be opened, so what it held is not known.
                    eprintln!(
                        "jelly topics: `{topic}` deleted (it was unavailable; its files are removed)"
                    );
                } else {
                    eprintln!("jelly topics: `{topic}` deleted (it held {})", held(&v));
                }
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_lists_unavailable_topics_below() {
        let v = serde_json::json!({
            "topics": [{"name": "t", "first_offset": 0, "next_offset": 1, "items": 1, "subscribers": []}],
            "unavailable": [{"name": "r", "reason": "corrupt log segment x at byte 9"}],
        });
        let t = table(&v);
        assert!(
            t.ends_with("r  UNAVAILABLE: corrupt log segment x at byte 9\n"),
            "{t}"
        );
    }

    #[test]
    fn table_aligns_columns() {
        let v = serde_json::json!({"topics": [
            {"name": "weather", "first_offset": 0, "next_offset": 1234, "items": 1234, "subscribers": [{}, {}]},
            {"name": "t", "first_offset": 5, "next_offset": 7, "items": 2, "subscribers": []},
        ]});
        assert_eq!(
            table(&v),
            "TOPIC    FIRST  NEXT  ITEMS  SUBSCRIBERS\n\
             weather      0  1234   1234            2\n\
             t            5     7      2            0\n"
        );
    }

    #[test]
    fn topic_names_cannot_reach_other_endpoints() {
        assert_eq!(topic_path("a.b_c-1").unwrap(), "/topics/a.b_c-1");
        for bad in ["", "a/b", "a?x=1", "../x", "a b", ".", "..", ".hidden"] {
            assert!(topic_path(bad).is_err(), "{bad}");
        }
    }
}
