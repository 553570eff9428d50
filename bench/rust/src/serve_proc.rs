//! A `jelly serve` process (or a peer server's) for a benchmark: its own temporary
//! directory and config file, started and waited for until it listens, killed and
//! cleaned up on drop.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// A running `jelly serve` (the release binary, as users run it).
pub struct ServeProc {
    child: Child,
    /// The server's base URL, as it printed it.
    pub url: String,
    dir: PathBuf,
}

impl ServeProc {
    /// Starts `jelly serve --config` with `toml` (its `data` directory is added, in a
    /// fresh temporary directory named after `name`) and waits until it listens. What
    /// the server says on stderr is shown with a `[name]` prefix.
    pub fn start(jelly: &Path, name: &str, toml: &str) -> Result<ServeProc, String> {
        let dir = Self::fresh_dir(name)?;
        let config = dir.join("serve.toml");
        let text = format!("data = \"{}\"\n{toml}", dir.join("data").display());
        std::fs::write(&config, text).map_err(|e| format!("{}: {e}", config.display()))?;
        let mut cmd = Command::new(jelly);
        cmd.args(["serve", "--log-level", "warn", "--config"])
            .arg(&config);
        Self::launch(cmd, name, dir)
    }

    /// Starts another server (a peer) with `cmd`, which must say `listening on URL` on
    /// stderr once it takes requests; it runs in a fresh temporary directory.
    pub fn start_command(mut cmd: Command, name: &str) -> Result<ServeProc, String> {
        let dir = Self::fresh_dir(name)?;
        cmd.current_dir(&dir);
        Self::launch(cmd, name, dir)
    }

    fn fresh_dir(name: &str) -> Result<PathBuf, String> {
        let dir = std::env::temp_dir().join(format!("jelly-bench-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        Ok(dir)
    }

    fn launch(mut cmd: Command, name: &str, dir: PathBuf) -> Result<ServeProc, String> {
        let program = cmd.get_program().to_string_lossy().into_owned();
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("{program}: {e}"))?;
        let mut lines = BufReader::new(child.stderr.take().ok_or("no stderr")?).lines();
        let url = loop {
            match lines.next() {
                Some(Ok(line)) => {
                    if let Some((_, u)) = line.split_once(": listening on ") {
                        break u.trim().to_string();
                    }
                    eprintln!("[{name}] {line}");
                }
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(format!("{name}: {program} ended before listening"));
                }
            }
        };
        // Keep draining (and showing) what the server says.
        let name = name.to_string();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                eprintln!("[{name}] {line}");
            }
        });
        Ok(ServeProc { child, url, dir })
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Kills the server now and waits for it (dropping it does too).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Whether the process has ended (crashed), and how.
    pub fn exited(&mut self) -> Option<String> {
        match self.child.try_wait() {
            Ok(Some(status)) => Some(status.to_string()),
            _ => None,
        }
    }
}

impl Drop for ServeProc {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
