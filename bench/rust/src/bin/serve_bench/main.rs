//! `serve_bench`: end-to-end benchmarks of `jelly serve` on loopback. The server runs
//! as its own process (the release `jelly` binary); publisher and subscriber run here.
//!
//! ```text
//! serve_bench throughput --transport http|ws|grpc [--input F.nt] [--statements 1000000]
//!             [--frame 1000] [--jelly target/release/jelly]
//! serve_bench latency --transport http|ws|grpc [--sizes 5,50,200] [--intervals-us 10000,1000,100]
//!             [--items 2000] [--jelly target/release/jelly] [--busy-poll]
//!             [--server-config 'worker_threads = 1']…
//! both:       [--servers jellyfish,jvm-relay] [--relay-jar bench/jvm-grpc/target/jelly-jvm-grpc-client.jar]
//!             [--warmup-statements N] [--warmup-rounds 3]
//! ```
//!
//! Before it is measured, each server carries `--warmup-rounds` passes of
//! `--warmup-statements` statements on a topic of its own: by default 1M when
//! `jvm-relay` is among the servers (so that it runs JIT-compiled code), else none.
//!
//! `--servers` runs every measurement against each server in turn, in one run: the
//! peer `jvm-relay` is the grpc-java relay on Jelly-JVM's codec of `bench/jvm-grpc`
//! (`JellyGrpcRelay`; gRPC only, live only, memory only; build it with
//! `bash bench/jvm-grpc/build.sh`). Each JSON line names its `server`.
//!
//! Each measurement prints one JSON line. The server uses a file log with
//! `durability = "none"` (no fsync on the path; the durable append rate is measured
//! separately by `crates/jelly-server/tests/log_bench.rs`).
//!
//! - **throughput**: the publisher sends a pre-encoded Jelly stream of `--statements`
//!   statements in frames of `--frame` statements; the subscriber, connected first,
//!   decodes every statement. Rate = statements / (first send → last statement decoded).
//! - **latency**: items of S statements every I µs (open loop; the send time is taken
//!   when the item is handed to the transport); the subscriber notes when each item's
//!   frame is decoded. Reports p50/p90/p99/max of arrival − send. With `--busy-poll`
//!   the server runs with `busy_poll = true` and the subscriber's thread polls for
//!   I/O without sleeping too (`jelly_server::runtime`); the publisher still sleeps
//!   between items.

mod transports;

use std::io::Read;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use jelly::{Encoder, EncoderConfig, PhysicalType, Statement, StreamOptions};
use jelly_bench::procstat;
use jelly_bench::serve_proc::ServeProc;
use transports::Transport;

struct Args {
    cmd: String,
    transport: Transport,
    input: PathBuf,
    statements: usize,
    frame: usize,
    sizes: Vec<usize>,
    intervals_us: Vec<u64>,
    items: usize,
    jelly: PathBuf,
    /// `file` (default) or `memory`.
    log: String,
    /// Subscribe over another transport than the publisher's (latency only).
    sub_transport: Option<Transport>,
    /// Server and subscriber poll for I/O instead of sleeping.
    busy_poll: bool,
    /// More lines of the server's config file (`--server-config 'worker_threads = 1'`).
    server_config: Vec<String>,
    /// The servers measured, each in turn.
    servers: Vec<Server>,
    /// The jar of the `jvm-relay` peer.
    relay_jar: PathBuf,
    /// Statements sent through each server before it is measured ([`warm_up`]); by
    /// default 1M when a JIT-compiled peer is among the servers, else none.
    warmup_statements: usize,
    /// How many times they are sent.
    warmup_rounds: usize,
}

/// A server under measurement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Server {
    /// `jelly serve`.
    Jellyfish,
    /// The grpc-java relay on Jelly-JVM's codec (`bench/jvm-grpc`).
    JvmRelay,
}

impl Server {
    fn parse(s: &str) -> Option<Server> {
        match s {
            "jellyfish" => Some(Server::Jellyfish),
            "jvm-relay" => Some(Server::JvmRelay),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Server::Jellyfish => "jellyfish",
            Server::JvmRelay => "jvm-relay",
        }
    }
}

fn parse_args() -> Result<Args, String> {
    let mut it = std::env::args().skip(1);
    let cmd = it.next().ok_or("missing command: throughput or latency")?;
    let mut a = Args {
        cmd,
        transport: Transport::Http,
        input: PathBuf::from("../shared/datasets/iot-assist-weather/iot-assist-weather.nt"),
        statements: 1_000_000,
        frame: 1000,
        sizes: vec![5, 50, 200],
        intervals_us: vec![10_000, 1_000, 100],
        items: 2000,
        jelly: PathBuf::from("target/release/jelly"),
        log: "file".into(),
        sub_transport: None,
        busy_poll: false,
        server_config: Vec::new(),
        servers: vec![Server::Jellyfish],
        relay_jar: PathBuf::from("bench/jvm-grpc/target/jelly-jvm-grpc-client.jar"),
        warmup_statements: 0,
        warmup_rounds: 3,
    };
    let mut warmup_statements = None;
    let list = |v: String| -> Result<Vec<u64>, String> {
        v.split(',')
            .map(|x| x.trim().parse().map_err(|e| format!("{x}: {e}")))
            .collect()
    };
    while let Some(flag) = it.next() {
        let mut val = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--transport" => {
                a.transport = Transport::parse(&val()?).ok_or("transport: http, ws or grpc")?
            }
            "--input" => a.input = PathBuf::from(val()?),
            "--statements" => a.statements = val()?.parse().map_err(|e| format!("{e}"))?,
            "--frame" => a.frame = val()?.parse().map_err(|e| format!("{e}"))?,
            "--sizes" => a.sizes = list(val()?)?.into_iter().map(|x| x as usize).collect(),
            "--intervals-us" => a.intervals_us = list(val()?)?,
            "--items" => a.items = val()?.parse().map_err(|e| format!("{e}"))?,
            "--jelly" => a.jelly = PathBuf::from(val()?),
            "--log" => a.log = val()?,
            "--sub-transport" => {
                a.sub_transport =
                    Some(Transport::parse(&val()?).ok_or("transport: http, ws or grpc")?)
            }
            "--busy-poll" => a.busy_poll = true,
            "--server-config" => a.server_config.push(val()?),
            "--servers" => {
                a.servers = val()?
                    .split(',')
                    .map(|x| {
                        Server::parse(x.trim()).ok_or(format!("server {x}: jellyfish or jvm-relay"))
                    })
                    .collect::<Result<_, _>>()?
            }
            "--relay-jar" => a.relay_jar = PathBuf::from(val()?),
            "--warmup-statements" => {
                warmup_statements = Some(val()?.parse().map_err(|e| format!("{e}"))?)
            }
            "--warmup-rounds" => a.warmup_rounds = val()?.parse().map_err(|e| format!("{e}"))?,
            other => return Err(format!("unknown flag {other}")),
        }
    }
    let peer = a.servers.contains(&Server::JvmRelay);
    a.warmup_statements = warmup_statements.unwrap_or(if peer { 1_000_000 } else { 0 });
    if peer
        && (a.transport, a.sub_transport.unwrap_or(a.transport))
            != (Transport::Grpc, Transport::Grpc)
    {
        return Err("the jvm-relay peer speaks gRPC only: use --transport grpc".into());
    }
    Ok(a)
}

/// `jelly serve` with a file log (or `log`) and no fsync on the path, or the peer.
fn start_server(a: &Args, server: Server) -> Result<ServeProc, String> {
    if server == Server::JvmRelay {
        if !a.relay_jar.is_file() {
            return Err(format!(
                "{}: no such jar (build it: bash bench/jvm-grpc/build.sh)",
                a.relay_jar.display()
            ));
        }
        let mut cmd = std::process::Command::new("java");
        cmd.arg("-jar")
            .arg(std::path::absolute(&a.relay_jar).map_err(|e| e.to_string())?)
            .args(["relay", "127.0.0.1:0"]);
        return ServeProc::start_command(cmd, "jvm-relay");
    }
    let (jelly, log, busy_poll) = (&a.jelly, &a.log, a.busy_poll);
    let mut toml = format!(
        "listen = \"127.0.0.1:0\"\nlog = \"{log}\"\ndurability = \"none\"\nmax_body_bytes = 1073741824\n"
    );
    // Only when asked, so that `--jelly` can point at a build older than the setting.
    if busy_poll {
        toml.push_str("busy_poll = true\n");
    }
    for line in &a.server_config {
        toml.push_str(line);
        toml.push('\n');
    }
    ServeProc::start(jelly, "serve", &toml)
}

/// The input's statements, cycled up to `n`.
fn load(path: &PathBuf, n: usize) -> Result<Vec<Statement>, String> {
    let mut text = String::new();
    std::fs::File::open(path)
        .and_then(|mut f| f.read_to_string(&mut text))
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let base = jelly::nquads::parse_document(&text).map_err(|e| e.to_string())?;
    if base.is_empty() {
        return Err("empty input".into());
    }
    Ok(base.iter().cycle().take(n).cloned().collect())
}

/// Frames of `per_frame` statements of one continuous stream (tables carry over), as
/// bare frame messages; the first one starts with the options row.
fn encode_stream(st: &[Statement], per_frame: usize, physical: PhysicalType) -> Vec<Vec<u8>> {
    let opts = StreamOptions::big().with_physical_type(physical);
    let mut enc = Encoder::with_config(opts, EncoderConfig::default()).expect("options");
    st.chunks(per_frame)
        .map(|c| {
            for s in c {
                enc.add(s.as_ref()).expect("encodable");
            }
            enc.finish_frame()
        })
        .collect()
}

/// Each chunk as its own one-frame spliceable stream (for transports that take one
/// stream per request; spliceable, so several can share one request body).
fn encode_items(st: &[Statement], per_item: usize, physical: PhysicalType) -> Vec<Vec<u8>> {
    let opts = StreamOptions::big().with_physical_type(physical);
    st.chunks(per_item)
        .map(|c| {
            let cfg = EncoderConfig {
                spliceable: true,
                ..EncoderConfig::default()
            };
            let mut enc = Encoder::with_config(opts.clone(), cfg).expect("options");
            for s in c {
                enc.add(s.as_ref()).expect("encodable");
            }
            enc.finish_frame()
        })
        .collect()
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn main() {
    let a = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("serve_bench: {e}");
            std::process::exit(2);
        }
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let r = match a.cmd.as_str() {
        "throughput" => throughput(&a, &rt),
        "latency" => latency(&a, &rt),
        other => Err(format!("unknown command {other}")),
    };
    if let Err(e) = r {
        eprintln!("serve_bench: {e}");
        std::process::exit(1);
    }
}

fn throughput(a: &Args, rt: &tokio::runtime::Runtime) -> Result<(), String> {
    let st = load(&a.input, a.statements)?;
    let physical = if st.iter().any(|s| s.graph.is_some()) {
        PhysicalType::Quads
    } else {
        PhysicalType::Triples
    };
    let frames = if a.transport.one_stream_per_request() {
        encode_items(&st, a.frame, physical)
    } else {
        encode_stream(&st, a.frame, physical)
    };
    let total = st.len();
    drop(st);
    let frames = Arc::new(frames);
    let run = Run::new(a, physical)?;
    for &server in &a.servers {
        throughput_of(&run, rt, server, &frames, total)?;
    }
    Ok(())
}

/// One throughput run against `server`: prints its JSON line.
fn throughput_of(
    run: &Run,
    rt: &tokio::runtime::Runtime,
    server: Server,
    frames: &Arc<Vec<Vec<u8>>>,
    total: usize,
) -> Result<(), String> {
    let a = run.a;
    let bytes: usize = frames.iter().map(Vec::len).sum();
    let srv = start_server(a, server)?;
    let url = srv.url.clone();
    let publish_only = std::env::var_os("SERVE_BENCH_PUBLISH_ONLY").is_some();
    let p = rt.block_on(async {
        warm_up(run, server, &url).await?;
        pass(
            run,
            server,
            &url,
            "bench",
            frames,
            total,
            publish_only,
            srv.pid(),
        )
        .await
    })?;
    println!(
        "{{\"bench\":\"throughput\",\"server\":\"{}\",\"transport\":\"{}\",\"statements\":{total},\"frames\":{},\"statements_per_frame\":{},\"wire_bytes\":{bytes},\"warmup_statements\":{},\"seconds\":{:.4},\"publish_seconds\":{:.4},\"statements_per_sec\":{:.0},\"server_cpu_secs\":{:.3},\"client_cpu_secs\":{:.3},\"server_peak_rss_kib\":{}}}",
        server.name(),
        a.transport.name(),
        frames.len(),
        a.frame,
        run.warm.statements,
        p.secs,
        p.publish_secs,
        total as f64 / p.secs,
        p.server_cpu,
        p.client_cpu,
        procstat::hwm_kib(srv.pid())
    );
    Ok(())
}

/// What one [`pass`] took.
struct Pass {
    /// First send to last statement decoded.
    secs: f64,
    /// First send to the publisher's call answered.
    publish_secs: f64,
    server_cpu: f64,
    client_cpu: f64,
}

/// Publishes `frames` (`total` statements) to a new topic as fast as the transport
/// takes them, to one subscriber connected first, and waits for every statement.
#[allow(clippy::too_many_arguments)]
async fn pass(
    run: &Run<'_>,
    server: Server,
    url: &str,
    topic: &'static str,
    frames: &Arc<Vec<Vec<u8>>>,
    total: usize,
    publish_only: bool,
    pid: u32,
) -> Result<Pass, String> {
    let a = run.a;
    let ready = Arc::new(tokio::sync::Notify::new());
    if server == Server::Jellyfish {
        transports::create_topic(url, topic, run.physical).await?;
    }
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let sub = tokio::spawn(transports::subscribe(
        a.transport,
        url.to_string(),
        topic.into(),
        tx,
        ready.clone(),
    ));
    if publish_only {
        sub.abort();
    } else {
        subscribed(server, url, topic, &ready).await?;
    }
    let cpu0 = procstat::cpu_secs(pid);
    let ccpu0 = procstat::cpu_secs(std::process::id());
    let t0 = Instant::now();
    let publ = tokio::spawn({
        let (url, frames, transport) = (url.to_string(), frames.clone(), a.transport);
        async move {
            transports::publish_all(transport, url, topic.into(), frames).await?;
            Ok::<_, String>(t0.elapsed().as_secs_f64())
        }
    });
    let mut got = if publish_only { total } else { 0 };
    while got < total {
        match tokio::time::timeout(Duration::from_secs(60), rx.recv()).await {
            Ok(Some(arrival)) => got += arrival.statements,
            Ok(None) => return Err(format!("subscriber ended after {got} statements")),
            Err(_) => return Err(format!("no progress for 60 s after {got} statements")),
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    let server_cpu = procstat::cpu_secs(pid) - cpu0;
    let client_cpu = procstat::cpu_secs(std::process::id()) - ccpu0;
    let publish_secs = publ.await.map_err(|e| e.to_string())??;
    sub.abort();
    Ok(Pass {
        secs,
        publish_secs,
        server_cpu,
        client_cpu,
    })
}

/// What every measurement of a run shares: its arguments, the stream's physical type,
/// and the warm-up traffic.
struct Run<'a> {
    a: &'a Args,
    physical: PhysicalType,
    warm: Warmup,
}

/// The warm-up traffic: `--warmup-statements` statements in frames of 1,000, encoded
/// once for every server and cell of a run.
struct Warmup {
    frames: Arc<Vec<Vec<u8>>>,
    statements: usize,
}

impl<'a> Run<'a> {
    fn new(a: &'a Args, physical: PhysicalType) -> Result<Run<'a>, String> {
        let warm = if a.warmup_statements == 0 {
            Warmup {
                frames: Arc::default(),
                statements: 0,
            }
        } else {
            let st = load(&a.input, a.warmup_statements)?;
            let frames = if a.transport.one_stream_per_request() {
                encode_items(&st, 1000, physical)
            } else {
                encode_stream(&st, 1000, physical)
            };
            Warmup {
                frames: Arc::new(frames),
                statements: st.len(),
            }
        };
        Ok(Run { a, physical, warm })
    }
}

/// The run's warm-up traffic through the server, `--warmup-rounds` times, on a topic
/// of its own before anything is measured, so that a JIT-compiled peer runs compiled
/// code, as it would after minutes in service (jellyfish is compiled ahead of time; it
/// gets the same pass).
async fn warm_up(run: &Run<'_>, server: Server, url: &str) -> Result<(), String> {
    if run.warm.statements == 0 {
        return Ok(());
    }
    for _ in 0..run.a.warmup_rounds {
        let (frames, n) = (&run.warm.frames, run.warm.statements);
        pass(run, server, url, "warmup", frames, n, false, 0).await?;
        if server == Server::Jellyfish {
            transports::delete_topic(url, "warmup").await?;
        }
    }
    Ok(())
}

/// Waits until `server` has registered the subscriber: jellyfish lists it in the
/// topic's description; the peer answers the call's headers once it has.
async fn subscribed(
    server: Server,
    url: &str,
    topic: &str,
    ready: &tokio::sync::Notify,
) -> Result<(), String> {
    match server {
        Server::Jellyfish => transports::wait_subscribed(url, topic).await,
        Server::JvmRelay => tokio::time::timeout(Duration::from_secs(30), ready.notified())
            .await
            .map_err(|_| "the subscriber never registered".to_string()),
    }
}

fn latency(a: &Args, rt: &tokio::runtime::Runtime) -> Result<(), String> {
    let pool = load(&a.input, 200 * 1000)?;
    let physical = if pool.iter().any(|s| s.graph.is_some()) {
        PhysicalType::Quads
    } else {
        PhysicalType::Triples
    };
    let run = Run::new(a, physical)?;
    for &size in &a.sizes {
        for &interval in &a.intervals_us {
            // Fewer items at long intervals keeps each run near 5 s.
            let items = a.items.min((5_000_000 / interval.max(1)) as usize).max(200);
            let warmup = (items / 10).max(20);
            let n = items + warmup;
            let st: Vec<Statement> = pool.iter().cycle().take(n * size).cloned().collect();
            let frames = if a.transport.one_stream_per_request() {
                encode_items(&st, size, physical)
            } else {
                encode_stream(&st, size, physical)
            };
            for &server in &a.servers {
                let lat = latency_of(&run, rt, server, frames.clone(), interval, warmup)?;
                println!(
                    "{{\"bench\":\"latency\",\"server\":\"{}\",\"transport\":\"{}\",\"sub_transport\":\"{}\",\"busy_poll\":{},\"statements_per_item\":{size},\"interval_us\":{interval},\"items\":{},\"p50_us\":{:.1},\"p90_us\":{:.1},\"p99_us\":{:.1},\"max_us\":{:.1}}}",
                    server.name(),
                    a.transport.name(),
                    a.sub_transport.unwrap_or(a.transport).name(),
                    a.busy_poll,
                    lat.len(),
                    percentile(&lat, 0.5),
                    percentile(&lat, 0.9),
                    percentile(&lat, 0.99),
                    lat.last().copied().unwrap_or(f64::NAN)
                );
            }
        }
    }
    Ok(())
}

/// One latency run against `server`: the sorted latencies (µs) after the warm-up.
fn latency_of(
    run: &Run,
    rt: &tokio::runtime::Runtime,
    server: Server,
    frames: Vec<Vec<u8>>,
    interval: u64,
    warmup: usize,
) -> Result<Vec<f64>, String> {
    let a = run.a;
    let n = frames.len();
    let srv = start_server(a, server)?;
    let url = srv.url.clone();
    let topic = "lat";
    rt.block_on(async {
        warm_up(run, server, &url).await?;
        if server == Server::Jellyfish {
            transports::create_topic(&url, topic, run.physical).await?;
        }
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let ready = Arc::new(tokio::sync::Notify::new());
        // The subscriber runs on a thread of its own (a current-thread runtime), like
        // the publisher: its socket's wake-up goes straight to the task that decodes,
        // with no hand-off between runtime workers.
        let sub = transports::subscribe_on_own_thread(
            a.sub_transport.unwrap_or(a.transport),
            url.clone(),
            topic.into(),
            tx,
            ready.clone(),
            a.busy_poll,
        );
        subscribed(server, &url, topic, &ready).await?;
        let sent = transports::publish_paced(
            a.transport,
            url.clone(),
            topic.into(),
            frames,
            Duration::from_micros(interval),
        );
        let mut arrivals = vec![None; n];
        let mut got = 0;
        while got < n {
            match tokio::time::timeout(Duration::from_secs(60), rx.recv()).await {
                Ok(Some(arr)) => {
                    if let Some(slot) = arrivals.get_mut(arr.offset as usize) {
                        *slot = Some(arr.at);
                        got += 1;
                    }
                }
                Ok(None) => return Err("subscriber ended".to_string()),
                Err(_) => return Err(format!("timeout after {got} items")),
            }
        }
        let sent = sent.await.map_err(|e| e.to_string())??;
        sub.abort();
        let mut lat: Vec<f64> = sent
            .iter()
            .zip(&arrivals)
            .skip(warmup)
            .filter_map(|(s, a)| Some(a.as_ref()?.duration_since(*s).as_secs_f64() * 1e6))
            .collect();
        lat.sort_by(f64::total_cmp);
        Ok(lat)
    })
}
