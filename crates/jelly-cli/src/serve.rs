//! `jelly serve`: run the stream server.

use std::path::PathBuf;

use clap::Args;
use jelly_server::{Server, ServerConfig};

use crate::error::{CliError, CliResult};

pub const SERVE_HELP: &str = "\
Examples:
  jelly serve
  jelly serve --listen 0.0.0.0:8686 --data /var/lib/jelly
  jelly serve --config jelly.toml
  jelly serve --set durability=none --set max_topics=100
  jelly serve --demo
  jelly serve --listen 127.0.0.1:8687 --data edge --mirror http://127.0.0.1:8686/topics/weather
  jelly serve --tls-cert cert.pem --tls-key key.pem --auth-tokens tokens.toml
  curl -N localhost:8686/topics/weather/items -H 'Accept: application/n-quads'

Settings come from the embedded defaults, then the --config file (TOML), then
--set KEY=VALUE (any key of that file: --set durability=none --set
topic_defaults.retention_ms=86400000), then the other flags. The API is described in docs/http-api.md. SIGINT or SIGTERM stops the server
gracefully (live subscriptions are ended, in-flight requests finish).

--mirror makes this server a repeater of a topic of another jellyfish server: it
copies the topic with the same offsets, follows it live, and resumes where its own
log ends after a failure or restart. Local publishes to that topic are refused (409).
An https:// upstream is checked against the system's roots (add a private CA with
--mirror-ca); --mirror-token authenticates to it. `[[mirror]]` tables in the config
file do the same, with more settings (per-mirror token and ca, on_gone, and
keepalive_ms: TCP keepalive to the upstream, 15000 by default, 0: off).

Connections to this server get TCP keepalive (tcp_keepalive_ms, 60000) and, on
Linux, a bound on unacknowledged sent data (send_timeout_ms: by default the time
keepalive takes to give up, about twice tcp_keepalive_ms; 0: off), e.g.
--set send_timeout_ms=30000 drops a subscriber that stops reading (its buffers
full) after about 30 s.

--demo replays weather-station observations into the topic `weather`, a few items a
second, over and over: 100 recorded items built into the binary (one item per frame
of the recorded stream of ../shared/datasets/iot-assist-weather), or all 395 with
--demo-data ../shared/datasets/iot-assist-weather. The topic keeps its newest 64 MiB,
or topic_defaults.retention_bytes when that is not 0 (as with the memory log, below).

--set log=memory keeps topics in memory (lost on restart). Each memory topic then
keeps at most 256 MiB of items by default (topic_defaults.retention_bytes; 0: no
limit), besides topic_defaults.retention_items (1000000).

Security (docs/http-api.md, \"Security\"): --tls-cert/--tls-key serve HTTPS (HTTP/1.1,
HTTP/2 and gRPC on one port); --auth-tokens FILE turns bearer tokens on, a TOML file
  tokens = [ { name = \"ingest\", token = \"...\", publish = [\"sensors.*\"], subscribe = [\"*\"] } ]
(or token_sha256 = \"<hex>\" instead of token; admin = true for every right);
--max-connections-per-ip N closes connections over N per address; --reuse-port lets
several servers share the port.

--busy-poll runs the server on one worker thread that polls for I/O instead of
sleeping between items, so an item is handled without waiting for an idle CPU to wake
up (docs/server-design.md, \"Busy polling\"). It keeps one CPU busy while items flow
and bounds throughput to one thread. After 10 s without an append or a new
connection it sleeps until the next one, which pays the wake-up (--set
busy_poll_idle_ms=N changes the 10 s; 0 polls at all times).

Exit codes: 0 stopped by a signal, 2 usage error, bad config, or the address is taken.";

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// IP address and port to listen on (default 127.0.0.1:8686; host names are not looked up).
    #[arg(long, value_name = "ADDR", value_parser = jelly_server::config::parse_listen_address)]
    pub listen: Option<std::net::SocketAddr>,
    /// Data directory of the durable logs (default ./data).
    #[arg(long, value_name = "DIR")]
    pub data: Option<PathBuf>,
    /// A TOML configuration file.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Publish the recorded weather stream into the topic `weather`.
    #[arg(long)]
    pub demo: bool,
    /// Folder of a demo dataset to replay instead of the built-in one (an .nt file and
    /// frames.txt, e.g. ../shared/datasets/iot-assist-weather for all 395 items).
    #[arg(long = "demo-data", value_name = "DIR", requires = "demo")]
    pub demo_data: Option<PathBuf>,
    /// Demo items per second (more than 0, at most 100000).
    #[arg(long = "demo-rate", value_name = "N", default_value_t = 4.0, value_parser = demo_rate)]
    pub demo_rate: f64,
    /// Mirror a topic of another server: URL/topics/NAME, or URL/topics/NAME=LOCAL to
    /// store it under another name here. Repeatable.
    #[arg(long = "mirror", value_name = "URL/topics/NAME[=LOCAL]")]
    pub mirror: Vec<String>,
    /// Bearer token sent to the upstreams of --mirror.
    #[arg(long = "mirror-token", value_name = "TOKEN", requires = "mirror")]
    pub mirror_token: Option<String>,
    /// PEM file of certificate authorities to trust for https:// upstreams of
    /// --mirror, in addition to the system's.
    #[arg(long = "mirror-ca", value_name = "FILE", requires = "mirror")]
    pub mirror_ca: Option<PathBuf>,
    /// TLS: PEM file of the certificate chain (with --tls-key).
    #[arg(long = "tls-cert", value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// TLS: PEM file of the private key (with --tls-cert).
    #[arg(long = "tls-key", value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Bearer tokens: a TOML file of `tokens = [...]` (turns authentication on).
    #[arg(long = "auth-tokens", value_name = "FILE")]
    pub auth_tokens: Option<PathBuf>,
    /// Most open connections per client address (0: no limit).
    #[arg(long = "max-connections-per-ip", value_name = "N")]
    pub max_connections_per_ip: Option<usize>,
    /// Let browser pages from ORIGIN (e.g. `https://app.example.org`; `*`: any) read
    /// the API across origins (CORS), for example with EventSource. Repeatable.
    #[arg(long = "cors-origin", value_name = "ORIGIN")]
    pub cors_origins: Vec<String>,
    /// SO_REUSEPORT: let several servers listen on the same port.
    #[arg(long = "reuse-port")]
    pub reuse_port: bool,
    /// Runtime worker threads (default: one per CPU).
    #[arg(long = "worker-threads", value_name = "N")]
    pub worker_threads: Option<usize>,
    /// Run on one worker thread that polls for I/O instead of sleeping when idle:
    /// lower latency for sparse items, one CPU kept busy while they flow.
    #[arg(long = "busy-poll")]
    pub busy_poll: bool,
    /// Set any key of the config file, over the file: `KEY=VALUE`, the key dotted for a
    /// table (`topic_defaults.retention_ms=86400000`), the value as in the file (a
    /// bare word is a string: `durability=none`). Repeatable.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Log level: error, warn, info, debug, trace.
    #[arg(long = "log-level", value_name = "LEVEL", default_value = "info")]
    pub log_level: tracing::Level,
}

/// The configuration: defaults, then the file, then the flags.
pub fn config(a: &ServeArgs) -> CliResult<ServerConfig> {
    let mut c = match &a.config {
        Some(p) => ServerConfig::from_file_with(p, &a.set),
        None => ServerConfig::from_toml_with("", "the defaults", &a.set),
    }
    .map_err(|e| CliError::usage(e.to_string()))?;
    if let Some(l) = a.listen {
        c.listen = l;
    }
    if let Some(d) = &a.data {
        c.data = d.clone();
    }
    if let (Some(cert), Some(key)) = (&a.tls_cert, &a.tls_key) {
        c.tls = Some(jelly_server::tls::TlsConfig {
            cert: cert.clone(),
            key: key.clone(),
        });
    }
    if let Some(f) = &a.auth_tokens {
        c.auth.get_or_insert_with(Default::default).token_file = Some(f.clone());
    }
    if let Some(n) = a.max_connections_per_ip {
        c.max_connections_per_ip = n;
    }
    c.cors_origins.extend(a.cors_origins.iter().cloned());
    if a.reuse_port {
        c.reuse_port = true;
    }
    if let Some(n) = a.worker_threads {
        c.worker_threads = n;
    }
    if a.busy_poll {
        c.busy_poll = true;
    }
    for m in &a.mirror {
        let mut m =
            jelly_server::config::MirrorConfig::from_topic_url(m).map_err(CliError::usage)?;
        m.token.clone_from(&a.mirror_token);
        m.ca.clone_from(&a.mirror_ca);
        c.mirrors.push(m);
    }
    c.check().map_err(CliError::usage)?;
    Ok(c)
}

fn demo_data(dir: &std::path::Path) -> CliResult<jelly_server::demo::DemoData> {
    let frames = dir.join("frames.txt");
    let nt = std::fs::read_dir(dir)
        .map_err(|e| CliError::io(&format!("--demo-data {}", dir.display()), &e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "nt"))
        .ok_or_else(|| {
            CliError::usage(format!(
                "--demo-data {}: no .nt file for the demo",
                dir.display()
            ))
        })?;
    jelly_server::demo::DemoData::load(&nt, &frames)
        .map_err(|e| CliError::io(&nt.display().to_string(), &e))
}

/// The server's log destination: stderr, where a failed write (a closed pipe, a full
/// disk under a redirect) loses the line rather than failing, or panicking, the
/// request or the log writer thread that logged it.
struct LossyStderr;

impl std::io::Write for LossyStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let _ = std::io::stderr().write_all(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let _ = std::io::stderr().flush();
        Ok(())
    }
}

/// `eprintln!` that does not panic when stderr cannot be written (see [`LossyStderr`]).
macro_rules! note {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

pub fn run(a: &ServeArgs, quiet: bool) -> CliResult {
    let config = config(a)?;
    let level = if quiet {
        tracing::Level::WARN
    } else {
        a.log_level
    };
    let _ = tracing_subscriber::fmt()
        .with_max_level(level)
        .with_writer(|| LossyStderr)
        .with_target(false)
        .log_internal_errors(false)
        .try_init();
    let demo = match (&a.demo_data, a.demo) {
        (Some(dir), true) => Some(demo_data(dir)?),
        (None, true) => Some(
            jelly_server::demo::DemoData::embedded()
                .map_err(|e| CliError::io("the built-in demo data", &e))?,
        ),
        (_, false) => None,
    };
    let rt =
        jelly_server::runtime::build(&config).map_err(|e| CliError::io("tokio runtime", &e))?;
    rt.block_on(async move {
        let busy_poll = config.busy_poll;
        let server = Server::start(config)
            .await
            .map_err(|e| {
                if e.kind() == std::io::ErrorKind::InvalidInput {
                    // A bad [auth] or [tls] section: the message names it.
                    CliError::usage(e.to_string())
                } else {
                    // The message says what failed: the data directory, or listening.
                    CliError::usage(e.to_string())
                }
            })?;
        if !quiet {
            note!("jelly serve: listening on {}", server.url());
            if busy_poll {
                note!(
                    "jelly serve: busy polling: one worker thread, one CPU kept busy while items flow"
                );
            }
        }
        if let Some(d) = demo {
            if !quiet {
                note!(
                    "jelly serve: demo: {} items into topic `weather`; try\n  curl -N {}/topics/weather/items -H 'Accept: application/n-quads'",
                    d.items.len(),
                    server.url()
                );
            }
            jelly_server::demo::spawn(
                server.state().clone(),
                d,
                a.demo_rate,
                server.shutdown_signal(),
            );
        }
        server
            .run_until(jelly_server::server::termination_signal())
            .await
            .map_err(|e| CliError::io("server", &e))
    })
}

/// `--demo-rate`: items per second, more than 0 (at 0 the demo would publish one item
/// and then wait for ever) and at most 100000.
fn demo_rate(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(r) if r > 0.0 && r <= 100_000.0 => Ok(r),
        Ok(r) => Err(format!(
            "{r} items per second: give more than 0 and at most 100000"
        )),
        Err(e) => Err(format!("{e}")),
    }
}
