//! `fanout_bench`: the fan-out benchmark of issue 6 (Ztreamy's scenario). One publisher
//! posts items of about 900 bytes at a fixed rate (4/s) to `jelly serve`; N long-lived
//! subscribers (HTTP chunked streams or WebSockets, spread over 127.0.0.x source
//! addresses and several load-generator processes) receive them on the same machine.
//! Over a fixed window after every subscriber is connected, it measures the delivery
//! delay of every item at every subscriber (median, p99), loss and duplicates, server
//! CPU and RSS, and the load generator's CPU.
//!
//! ```text
//! fanout_bench run --subscribers N [--transport http|ws] [--window-ms 0] [--encoding none|gzip|zstd]
//!                  [--rate 4] [--item-bytes 900] [--measure-secs 20] [--edges auto|K] ...
//! fanout_bench clients ...   (a load-generator process, started by `run`)
//! ```
//! `run` prints one JSON line. See bench/run_fanout.sh for the whole matrix.

mod body;
mod clients;
mod driver;
mod frames;
mod hist;
mod items;
mod publisher;
mod simple_http;
mod topology;

use std::time::{SystemTime, UNIX_EPOCH};

/// Microseconds since the Unix epoch (the publisher and subscribers share this clock).
pub fn unix_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

/// Flag/value pairs of a command line.
pub struct Flags(Vec<(String, String)>);

impl Flags {
    fn parse(args: impl Iterator<Item = String>) -> Result<Flags, String> {
        let mut v = Vec::new();
        let mut it = args;
        while let Some(flag) = it.next() {
            let name = flag
                .strip_prefix("--")
                .ok_or_else(|| format!("expected a --flag, got `{flag}`"))?;
            let val = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
            v.push((name.to_string(), val));
        }
        Ok(Flags(v))
    }

    /// The value of `--name`, taken out (so unknown flags can be reported at the end).
    pub fn take(&mut self, name: &str) -> Option<String> {
        let i = self.0.iter().position(|(k, _)| k == name)?;
        Some(self.0.remove(i).1)
    }

    pub fn get<T: std::str::FromStr>(&mut self, name: &str, default: T) -> Result<T, String>
    where
        T::Err: std::fmt::Display,
    {
        match self.take(name) {
            None => Ok(default),
            Some(v) => v.parse().map_err(|e| format!("--{name} {v}: {e}")),
        }
    }

    pub fn finish(self) -> Result<(), String> {
        match self.0.first() {
            None => Ok(()),
            Some((k, _)) => Err(format!("unknown flag --{k}")),
        }
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let cmd = args.next().unwrap_or_default();
    let r = Flags::parse(args).and_then(|flags| match cmd.as_str() {
        "run" => driver::run(flags),
        "clients" => driver::clients(flags),
        other => Err(format!("unknown command `{other}` (run or clients)")),
    });
    if let Err(e) = r {
        eprintln!("fanout_bench: {e}");
        std::process::exit(1);
    }
}
