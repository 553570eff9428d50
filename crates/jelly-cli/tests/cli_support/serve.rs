//! A `jelly serve` process on loopback for the CLI tests.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct ServeProc {
    pub child: Child,
    pub url: String,
}

impl ServeProc {
    pub fn start(data: &Path) -> ServeProc {
        Self::try_start_with(data, "127.0.0.1:0", &[]).expect("jelly serve ended before listening")
    }

    /// Like [`ServeProc::start`], with more flags.
    pub fn start_with(data: &Path, extra: &[&str]) -> ServeProc {
        let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        Self::try_start_with(data, "127.0.0.1:0", &extra)
            .expect("jelly serve ended before listening")
    }

    /// Starts `jelly serve` on `listen` with `extra` flags; `None` if it exits
    /// before listening (e.g. the address is taken).
    pub fn try_start_with(data: &Path, listen: &str, extra: &[String]) -> Option<ServeProc> {
        let mut child = Command::new(env!("CARGO_BIN_EXE_jelly"))
            .args(["serve", "--listen", listen, "--log-level", "warn", "--data"])
            .arg(data)
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn jelly serve");
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let url = loop {
            let Some(line) = lines.next() else {
                let _ = child.wait();
                return None;
            };
            let line = line.unwrap();
            if let Some(u) = line.strip_prefix("jelly serve: listening on ") {
                break u.trim().to_string();
            }
        };
        // Keep draining stderr so the server never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        Some(ServeProc { child, url })
    }

    /// SIGKILL (`kill -9`): no chance to flush or clean up.
    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM, then the exit code.
    pub fn stop(mut self) -> i32 {
        let pid = self.child.id().to_string();
        let st = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        assert!(st.success());
        let t0 = Instant::now();
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s.code().unwrap_or(-1);
            }
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "jelly serve did not stop on SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for ServeProc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A fresh temporary folder for one test (see [`super::TmpDir`]).
pub fn temp_dir(name: &str) -> super::TmpDir {
    super::TmpDir::new(&format!("jelly-cli-serve-{}-{name}", std::process::id()))
}
