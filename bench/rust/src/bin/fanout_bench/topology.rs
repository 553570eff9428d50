//! The server side: one origin `jelly serve` that takes the publisher's items, and
//! optionally K edge servers that mirror the origin's topic and share one listening
//! port through SO_REUSEPORT, so that subscribers see one address while no process
//! holds more connections than this machine's fd limit allows (20,000 per process).
//! Every server keeps its log in memory.

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

pub use jelly_bench::serve_proc::ServeProc;

use crate::simple_http;

/// The servers of one run.
pub struct Topology {
    pub origin: ServeProc,
    pub edges: Vec<ServeProc>,
    /// Where subscribers connect: the origin, or the edges' shared port.
    pub subscribe_addr: SocketAddr,
}

/// A free loopback port (bound, then released, so the edges can share it).
fn free_port() -> Result<u16, String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    Ok(l.local_addr().map_err(|e| e.to_string())?.port())
}

fn addr_of(url: &str) -> Result<SocketAddr, String> {
    url.trim_start_matches("http://")
        .trim_end_matches('/')
        .parse()
        .map_err(|e| format!("server url {url}: {e}"))
}

impl Topology {
    /// Starts the origin, creates `topic` there (`physical`: triples or quads), then
    /// starts `edges` mirrors of it (none: subscribers use the origin). `extra` is
    /// appended to every server's TOML configuration.
    pub fn start(
        jelly: &Path,
        edges: usize,
        topic: &str,
        physical: &str,
        extra: &str,
    ) -> Result<Topology, String> {
        let base = format!("log = \"memory\"\n{extra}\n");
        let origin = ServeProc::start(
            jelly,
            "origin",
            &format!("listen = \"127.0.0.1:0\"\n{base}"),
        )?;
        let (status, body) = simple_http::request(
            addr_of(&origin.url)?,
            "PUT",
            &format!("/topics/{topic}"),
            &format!("{{\"physical\":\"{physical}\"}}"),
        )?;
        if !(200..300).contains(&status) {
            return Err(format!("create topic: {status} {body}"));
        }
        if edges == 0 {
            let subscribe_addr = addr_of(&origin.url)?;
            return Ok(Topology {
                origin,
                edges: Vec::new(),
                subscribe_addr,
            });
        }
        let port = free_port()?;
        let mut es = Vec::new();
        for k in 0..edges {
            // One edge needs no shared port (and runs on servers without `reuse_port`).
            let reuse = if edges > 1 { "reuse_port = true\n" } else { "" };
            let toml = format!(
                "listen = \"127.0.0.1:{port}\"\n{reuse}{base}\n[[mirror]]\ntopic = \"{topic}\"\nupstream = \"{}\"\nupstream_topic = \"{topic}\"\n",
                origin.url
            );
            es.push(ServeProc::start(jelly, &format!("edge{k}"), &toml)?);
        }
        Ok(Topology {
            origin,
            edges: es,
            subscribe_addr: SocketAddr::from(([127, 0, 0, 1], port)),
        })
    }

    /// Kills every server now (dropping the topology does too).
    pub fn stop(&mut self) {
        for s in std::iter::once(&mut self.origin).chain(&mut self.edges) {
            s.kill();
        }
    }

    pub fn pids(&self) -> Vec<u32> {
        std::iter::once(&self.origin)
            .chain(&self.edges)
            .map(ServeProc::pid)
            .collect()
    }

    /// The servers that have ended, with their exit status.
    pub fn exited(&mut self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(s) = self.origin.exited() {
            out.push(format!("origin: {s}"));
        }
        for (k, e) in self.edges.iter_mut().enumerate() {
            if let Some(s) = e.exited() {
                out.push(format!("edge{k}: {s}"));
            }
        }
        out
    }

    /// Waits until `topic` answers on the subscribe address on many fresh connections
    /// in a row (each lands on some edge), i.e. every edge's mirror has created it.
    pub fn wait_ready(&self, topic: &str, timeout: Duration) -> Result<(), String> {
        let t0 = Instant::now();
        let want = 20 * self.edges.len().max(1);
        let mut ok = 0;
        let mut last = String::new();
        while ok < want {
            if t0.elapsed() > timeout {
                return Err(format!(
                    "topic `{topic}` not served on {} after {timeout:?}: {last}",
                    self.subscribe_addr
                ));
            }
            match simple_http::request(self.subscribe_addr, "GET", &format!("/topics/{topic}"), "")
                .map(|(s, _)| s)
            {
                Ok(200) => ok += 1,
                Ok(s) => {
                    ok = 0;
                    last = format!("status {s}");
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(e) => {
                    ok = 0;
                    last = e;
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
        }
        Ok(())
    }
}
