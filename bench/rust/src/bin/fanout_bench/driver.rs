//! The `run` command: starts the servers, the publisher and the load-generator
//! processes, waits until every subscriber is connected, measures one window and prints
//! the result as one JSON line. Every process it starts is killed when it returns.

use std::io::{BufRead as _, BufReader, Write as _};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use jelly::PhysicalType;
use serde_json::{Value, json};

use crate::Flags;
use crate::clients::{ClientConfig, Transport};
use crate::hist::Histogram;
use crate::items;
use crate::publisher::{Arrivals, Publisher};
use crate::topology::Topology;
use jelly_bench::procstat;

/// The `clients` command: one load-generator process.
pub fn clients(mut f: Flags) -> Result<(), String> {
    let target: SocketAddr = f
        .take("target")
        .ok_or("--target is required")?
        .parse()
        .map_err(|e| format!("--target: {e}"))?;
    let transport = Transport::parse(&f.get("transport", "http".to_string())?)
        .ok_or("--transport: http or ws")?;
    let encoding = f.get("encoding", "none".to_string())?;
    let cfg = ClientConfig {
        target,
        topic: f.get("topic", "t".to_string())?,
        transport,
        window_ms: f.get("window-ms", 0)?,
        accept_encoding: (encoding != "none").then_some(encoding),
        count: f.get("count", 1)?,
        first_index: f.get("first-index", 0)?,
        per_ip: f.get("per-ip", 10_000)?,
        connect_parallel: f.get("connect-parallel", 256)?,
        verify_every: f.get("verify-every", 1)?,
        ramp_timeout: Duration::from_secs(f.get("ramp-timeout-secs", 180)?),
    };
    f.finish()?;
    crate::clients::run(cfg)
}

/// Everything `run` is told.
struct RunConfig {
    jelly: PathBuf,
    input: PathBuf,
    subscribers: usize,
    transport: Transport,
    window_ms: u64,
    encoding: String,
    rate: f64,
    arrivals: Arrivals,
    item_bytes: usize,
    measure_secs: f64,
    settle_secs: f64,
    drain_secs: f64,
    max_drain_secs: f64,
    /// Edge servers (0: subscribers use the origin).
    edges: usize,
    per_process: usize,
    per_ip: usize,
    connect_parallel: usize,
    verify_every: usize,
    ramp_timeout_secs: u64,
    server_extra: String,
    label: String,
}

fn parse(mut f: Flags) -> Result<RunConfig, String> {
    let subscribers: usize = f.get("subscribers", 1000)?;
    let per_edge: usize = f.get("per-edge", 15_000)?;
    let edges = match f.get("edges", "auto".to_string())?.as_str() {
        "auto" if subscribers <= per_edge => 0,
        "auto" => subscribers.div_ceil(per_edge.max(1)),
        k => k.parse().map_err(|e| format!("--edges {k}: {e}"))?,
    };
    let transport = Transport::parse(&f.get("transport", "http".to_string())?)
        .ok_or("--transport: http or ws")?;
    let window_ms: u64 = f.get("window-ms", 0)?;
    let c = RunConfig {
        jelly: f.get("jelly", PathBuf::from("target/release/jelly"))?,
        input: f.get(
            "input",
            PathBuf::from("../shared/datasets/iot-assist-weather/iot-assist-weather.nt"),
        )?,
        subscribers,
        transport,
        window_ms,
        encoding: f.get("encoding", "none".to_string())?,
        rate: f.get("rate", 4.0)?,
        arrivals: Arrivals::parse(&f.get("arrivals", "poisson".to_string())?)
            .ok_or("--arrivals: fixed or poisson")?,
        item_bytes: f.get("item-bytes", 900)?,
        measure_secs: f.get("measure-secs", 20.0)?,
        settle_secs: f.get("settle-secs", 2.0)?,
        drain_secs: f.get("drain-secs", 3.0 + 3.0 * window_ms as f64 / 1000.0)?,
        max_drain_secs: f.get("max-drain-secs", 60.0)?,
        edges,
        per_process: f.get("per-process", 15_000)?,
        per_ip: f.get("per-ip", 10_000)?,
        connect_parallel: f.get("connect-parallel", 256)?,
        verify_every: f.get("verify-every", 1)?,
        ramp_timeout_secs: f.get("ramp-timeout-secs", 180)?,
        server_extra: f.get("server-extra", String::new())?.replace("\\n", "\n"),
        label: f.get("label", String::new())?,
    };
    f.finish()?;
    if !matches!(c.encoding.as_str(), "none" | "gzip" | "zstd") {
        return Err(format!("--encoding {}: none, gzip or zstd", c.encoding));
    }
    if c.transport == Transport::Ws && c.encoding != "none" {
        return Err("--encoding applies to HTTP subscribers only".into());
    }
    if c.rate <= 0.0 || c.measure_secs <= 0.0 {
        return Err("--rate and --measure-secs must be positive".into());
    }
    Ok(c)
}

/// A load-generator process and its command pipe.
struct LoadGen {
    child: Child,
    stdin: Option<ChildStdin>,
}

impl LoadGen {
    fn send(&mut self, line: &str) -> Result<(), String> {
        let stdin = self.stdin.as_mut().ok_or("load generator stdin closed")?;
        writeln!(stdin, "{line}")
            .and_then(|_| stdin.flush())
            .map_err(|e| format!("load generator: {e}"))
    }
}

impl Drop for LoadGen {
    fn drop(&mut self) {
        // Closing stdin ends the process; kill it if it lingers.
        drop(self.stdin.take());
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(2) {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_loadgens(
    c: &RunConfig,
    target: SocketAddr,
    events: &Sender<(usize, Value)>,
) -> Result<Vec<LoadGen>, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    // At least two processes, so both cores can run subscribers.
    let procs = c
        .subscribers
        .div_ceil(c.per_process.max(1))
        .max(2)
        .min(c.subscribers.max(1));
    let mut out = Vec::new();
    let mut first = 0;
    for k in 0..procs {
        let count = c.subscribers / procs + usize::from(k < c.subscribers % procs);
        let mut child = Command::new(&exe)
            .arg("clients")
            .args(["--target", &target.to_string()])
            .args(["--transport", c.transport.name()])
            .args(["--encoding", &c.encoding])
            .args(["--window-ms", &c.window_ms.to_string()])
            .args(["--count", &count.to_string()])
            .args(["--first-index", &first.to_string()])
            .args(["--per-ip", &c.per_ip.to_string()])
            .args(["--connect-parallel", &c.connect_parallel.to_string()])
            .args(["--verify-every", &c.verify_every.to_string()])
            .args(["--ramp-timeout-secs", &c.ramp_timeout_secs.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("{}: {e}", exe.display()))?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let tx = events.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                match serde_json::from_str::<Value>(&line) {
                    Ok(v) => {
                        if tx.send((k, v)).is_err() {
                            break;
                        }
                    }
                    Err(_) => eprintln!("[clients{k}] {line}"),
                }
            }
        });
        let stdin = child.stdin.take();
        out.push(LoadGen { child, stdin });
        first += count;
    }
    Ok(out)
}

/// Waits for one `event` line from each load generator.
fn collect(
    rx: &Receiver<(usize, Value)>,
    n: usize,
    event: &str,
    timeout: Duration,
) -> Result<Vec<Value>, String> {
    let mut got: Vec<Option<Value>> = vec![None; n];
    let t0 = Instant::now();
    while got.iter().any(Option::is_none) {
        let left = timeout.saturating_sub(t0.elapsed());
        match rx.recv_timeout(left) {
            Ok((k, v)) if v["event"] == event => got[k] = Some(v),
            Ok(_) => {}
            Err(_) => {
                let missing = got.iter().filter(|g| g.is_none()).count();
                return Err(format!(
                    "{missing} of {n} load generators sent no `{event}` within {timeout:?}"
                ));
            }
        }
    }
    Ok(got.into_iter().flatten().collect())
}

/// Peak of the summed RSS of two sets of processes, sampled every 200 ms.
struct RssSampler {
    stop: Arc<AtomicBool>,
    peaks: Arc<Mutex<(u64, u64)>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl RssSampler {
    fn start(servers: Vec<u32>, loadgens: Vec<u32>) -> RssSampler {
        let stop = Arc::new(AtomicBool::new(false));
        let peaks = Arc::new(Mutex::new((0, 0)));
        let (s, p) = (stop.clone(), peaks.clone());
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                let a: u64 = servers.iter().map(|&p| procstat::rss_kib(p)).sum();
                let b: u64 = loadgens.iter().map(|&p| procstat::rss_kib(p)).sum();
                if let Ok(mut pk) = p.lock() {
                    pk.0 = pk.0.max(a);
                    pk.1 = pk.1.max(b);
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        });
        RssSampler {
            stop,
            peaks,
            thread: Some(thread),
        }
    }

    /// Peak KiB of (servers, load generators).
    fn finish(mut self) -> (u64, u64) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.peaks.lock().map(|p| *p).unwrap_or_default()
    }
}

fn wait_for(mut cond: impl FnMut() -> bool, timeout: Duration) -> bool {
    let t0 = Instant::now();
    while !cond() {
        if t0.elapsed() > timeout {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    true
}

fn ms(us: f64) -> f64 {
    (us / 1000.0 * 100.0).round() / 100.0
}

/// The `run` command.
pub fn run(f: Flags) -> Result<(), String> {
    let c = parse(f)?;
    match run_config(&c) {
        Ok(line) => {
            println!("{line}");
            Ok(())
        }
        Err(e) => {
            // A line for the report too, so a failed configuration is not silently absent.
            let mut line = identity(&c);
            extend(&mut line, json!({ "error": e }));
            println!("{line}");
            Err(e)
        }
    }
}

/// The fields that name a configuration in its JSON line (result or error).
fn identity(c: &RunConfig) -> Value {
    json!({
        "bench": "fanout",
        "label": c.label,
        "transport": c.transport.name(),
        "subscribers": c.subscribers,
        "window_ms": c.window_ms,
        "encoding": c.encoding,
        "rate": c.rate,
        "edges": c.edges,
    })
}

/// Adds the fields of the object `more` to the object `out`.
fn extend(out: &mut Value, more: Value) {
    if let (Some(o), Value::Object(m)) = (out.as_object_mut(), more) {
        o.extend(m);
    }
}

fn run_config(c: &RunConfig) -> Result<Value, String> {
    let topic = "t";
    let pool = items::build(&c.input, c.item_bytes, 400)?;
    let physical = if pool.physical == PhysicalType::Quads {
        "quads"
    } else {
        "triples"
    };
    let mut topo = Topology::start(&c.jelly, c.edges, topic, physical, &c.server_extra)?;
    // Items flow from the start: the edges' mirrors and the subscribers join a live stream.
    let publisher = Publisher::start(
        topo.origin.url.clone(),
        topic.into(),
        pool.bodies.clone(),
        c.rate,
        c.arrivals,
    );
    let result = measure(c, &mut topo, publisher, topic, &pool);
    drop(topo);
    result
}

fn measure(
    c: &RunConfig,
    topo: &mut Topology,
    publisher: Publisher,
    topic: &str,
    pool: &items::Items,
) -> Result<Value, String> {
    let stop_publisher = |p: &Publisher| p.last_seq.store(0, Ordering::Relaxed);
    if !topo.edges.is_empty()
        && let Err(e) = topo.wait_ready(topic, Duration::from_secs(30))
    {
        stop_publisher(&publisher);
        return Err(e);
    }
    let (tx, rx) = channel();
    let t_ramp = Instant::now();
    let mut gens = match start_loadgens(c, topo.subscribe_addr, &tx) {
        Ok(g) => g,
        Err(e) => {
            stop_publisher(&publisher);
            return Err(e);
        }
    };
    let sampler = RssSampler::start(topo.pids(), gens.iter().map(|g| g.child.id()).collect());
    let ramp_limit = Duration::from_secs(c.ramp_timeout_secs + 30);
    let connected = match collect(&rx, gens.len(), "connected", ramp_limit) {
        Ok(v) => v,
        Err(e) => {
            stop_publisher(&publisher);
            return Err(e);
        }
    };
    let ramp_secs = t_ramp.elapsed().as_secs_f64();
    let sum = |vs: &[Value], k: &str| vs.iter().map(|v| v[k].as_u64().unwrap_or(0)).sum::<u64>();
    let ok = sum(&connected, "ok");
    let failed = sum(&connected, "failed");
    let retries = sum(&connected, "retries");
    let compressed = sum(&connected, "compressed");
    std::thread::sleep(Duration::from_secs_f64(c.settle_secs));

    // The window: items first..=last, announced before the first is sent.
    let lead = (c.rate * 0.5).ceil() as u64 + 1;
    let first = publisher.next_seq.load(Ordering::Relaxed) + lead;
    let n_items = ((c.rate * c.measure_secs).round() as u64).max(1);
    let last = first + n_items - 1;
    for g in &mut gens {
        g.send(&format!("measure {first}"))?;
    }
    publisher.last_seq.store(last, Ordering::Relaxed);
    let server_pids = topo.pids();
    let gen_pids: Vec<u32> = gens.iter().map(|g| g.child.id()).collect();
    let me = std::process::id();
    let window_limit = Duration::from_secs_f64(c.measure_secs * 3.0 + 30.0);
    if !wait_for(
        || publisher.next_seq.load(Ordering::Relaxed) >= first,
        window_limit,
    ) {
        return Err("the publisher stalled before the window".into());
    }
    let (t0, s0, g0, p0) = (
        Instant::now(),
        procstat::cpu_sum(&server_pids),
        procstat::cpu_sum(&gen_pids),
        procstat::cpu_secs(me),
    );
    if !wait_for(
        || publisher.next_seq.load(Ordering::Relaxed) > last,
        window_limit,
    ) {
        return Err("the publisher stalled in the window".into());
    }
    let pubs = publisher.finish()?;
    let wall = t0.elapsed().as_secs_f64();
    let (s1, g1, p1) = (
        procstat::cpu_sum(&server_pids),
        procstat::cpu_sum(&gen_pids),
        procstat::cpu_secs(me),
    );
    // Wait for the stragglers: at least `drain_secs`, then until nothing more arrives
    // for a second, every item has arrived, or `max_drain_secs` have passed.
    // Loss is counted over the subscriptions that check their items (all by default).
    let verified = c.subscribers.div_ceil(c.verify_every) as u64;
    let expected = verified * n_items;
    let t_drain = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(c.drain_secs));
    let mut last_count = None;
    while t_drain.elapsed().as_secs_f64() < c.max_drain_secs {
        for g in &mut gens {
            g.send("progress")?;
        }
        let now = sum(
            &collect(&rx, gens.len(), "progress", Duration::from_secs(30))?,
            "received",
        );
        if now >= expected || last_count == Some(now) {
            break;
        }
        last_count = Some(now);
        std::thread::sleep(Duration::from_secs(1));
    }
    let drain_secs = t_drain.elapsed().as_secs_f64();
    for g in &mut gens {
        g.send(&format!("report {last}"))?;
    }
    let reports = collect(&rx, gens.len(), "report", Duration::from_secs(60))?;
    let (rss_servers, rss_gens) = sampler.finish();
    let hwm_servers: u64 = server_pids.iter().map(|&p| procstat::hwm_kib(p)).sum();
    let exited = topo.exited();
    // Servers first: the side that closes first keeps the TIME_WAIT sockets, and on the
    // servers' side they do not get in the way of the next run's client ports.
    topo.stop();
    drop(gens);

    let mut delays = Histogram::default();
    for r in &reports {
        delays.merge(&Histogram::from_json(&r["delays"])?);
    }
    let received = sum(&reports, "received");
    let bytes = sum(&reports, "bytes");
    let live = sum(&reports, "live_at_measure");
    let mut errors: Vec<Value> = connected
        .iter()
        .chain(&reports)
        .flat_map(|v| v["errors"].as_array().cloned().unwrap_or_default())
        .collect();
    errors.dedup();
    errors.truncate(5);
    let q = |p: f64| ms(delays.quantile(p));
    let mut out = identity(c);
    let measured = json!({
        "arrivals": c.arrivals.name(),
        "loadgen_processes": reports.len(),
        "item_statements": (pool.statements * 10.0).round() / 10.0,
        "item_bytes_published": pool.bytes.round(),
        "item_bytes_delivered": if received > 0 { (bytes as f64 / received as f64).round() } else { 0.0 },
        "items": n_items,
        "measure_secs": (wall * 100.0).round() / 100.0,
        "ramp_secs": (ramp_secs * 100.0).round() / 100.0,
        "drain_secs": (drain_secs * 10.0).round() / 10.0,
        "connected": ok,
        "connect_failures": failed,
        "connect_retries": retries,
        "verify_every": c.verify_every,
        "verifying_subscribers": sum(&connected, "verifying"),
        "compressed_subscribers": compressed,
        "live_at_window_start": live,
        "disconnects_in_window": sum(&reports, "ended_in_window"),
        "expected": expected,
        "received": received,
        "delay_samples": delays.count(),
        "lost": expected.saturating_sub(received),
        "duplicates": sum(&reports, "duplicates"),
    });
    extend(&mut out, measured);
    let more = json!({
        "without_timestamp": sum(&reports, "no_timestamp"),
        "delay_p50_ms": q(0.5),
        "delay_p90_ms": q(0.9),
        "delay_p99_ms": q(0.99),
        "delay_p999_ms": q(0.999),
        "delay_max_ms": ms(delays.max() as f64),
        "delay_mean_ms": ms(delays.mean()),
        "server_cpu_pct": ((s1 - s0) / wall * 1000.0).round() / 10.0,
        "loadgen_cpu_pct": ((g1 - g0) / wall * 1000.0).round() / 10.0,
        "publisher_cpu_pct": ((p1 - p0) / wall * 1000.0).round() / 10.0,
        "server_rss_peak_mib": (rss_servers as f64 / 1024.0).round(),
        "server_hwm_sum_mib": (hwm_servers as f64 / 1024.0).round(),
        "loadgen_rss_peak_mib": (rss_gens as f64 / 1024.0).round(),
        "published_total": pubs.published,
        "publish_errors": pubs.errors,
        "publish_late": pubs.late,
        "post_p50_ms": ms(pubs.post_us.quantile(0.5)),
        "post_p99_ms": ms(pubs.post_us.quantile(0.99)),
        "server_exited": exited,
        "errors": errors,
        "publish_error": pubs.first_error,
    });
    extend(&mut out, more);
    Ok(out)
}
