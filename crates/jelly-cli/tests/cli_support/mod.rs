//! Helpers for the `cli_*` integration tests: run the real `jelly` binary.
#![allow(dead_code)]

pub mod serve;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use jelly::Statement;

/// What a run of the binary gave.
pub struct Run {
    pub code: i32,
    pub stdout: Vec<u8>,
    pub stderr: String,
}

impl Run {
    pub fn out(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }
}

/// Starts `jelly args…` with piped output, feeding `stdin` (if any) from a thread.
fn spawn_jelly(args: &[&str], stdin: Option<&[u8]>) -> std::process::Child {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_jelly"));
    cmd.args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn jelly");
    if let Some(input) = stdin {
        let mut si = child.stdin.take().expect("stdin");
        let data = input.to_vec();
        std::thread::spawn(move || {
            let _ = si.write_all(&data);
        });
    }
    child
}

/// Runs `jelly args…` with optional stdin. Fails the test if a panic reached stderr.
pub fn jelly(args: &[&str], stdin: Option<&[u8]>) -> Run {
    let child = spawn_jelly(args, stdin);
    let out = child.wait_with_output().expect("wait jelly");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        // `internal error` is what jelly's panic hook prints instead of a panic message.
        !stderr.contains("panicked")
            && !stderr.contains("RUST_BACKTRACE")
            && !stderr.contains("internal error"),
        "panic in jelly {args:?}: {stderr}"
    );
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: out.stdout,
        stderr,
    }
}

/// Runs `jelly args…` with optional stdin, as [`jelly`] does, and also returns the
/// run's peak resident memory in KiB: the kernel's `ru_maxrss` of this one child, from
/// `wait4` (other tests' children do not count in it).
///
/// Linux carries the peak of the process a program is started from into that
/// program's `ru_maxrss` (the child shares the test process's memory until it execs),
/// so the figure is at least this test process's own peak: compare it with a run that
/// does nothing (`jelly --version`), from a test binary that stays small.
pub fn jelly_peak_rss(args: &[&str], stdin: Option<&[u8]>) -> (Run, u64) {
    use std::io::Read;
    let mut child = spawn_jelly(args, stdin);
    let drain = |r: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut buf);
            }
            buf
        })
    };
    let out = drain(
        child
            .stdout
            .take()
            .map(|r| Box::new(r) as Box<dyn Read + Send>),
    );
    let err = drain(
        child
            .stderr
            .take()
            .map(|r| Box::new(r) as Box<dyn Read + Send>),
    );
    let pid = child.id() as libc::pid_t;
    let mut status: libc::c_int = 0;
    // SAFETY: an all-zero `rusage` is a valid value of the plain C struct, and wait4
    // writes only into the two locals passed; `pid` is this test's own child, which
    // nothing else waits for (`child` is dropped without a wait).
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(waited, pid, "wait4 on jelly {args:?}");
    drop(child);
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    };
    let stdout = out.join().expect("stdout reader");
    let stderr = String::from_utf8_lossy(&err.join().expect("stderr reader")).into_owned();
    assert!(
        !stderr.contains("panicked") && !stderr.contains("internal error"),
        "panic in jelly {args:?}: {stderr}"
    );
    let peak = u64::try_from(usage.ru_maxrss).unwrap_or(0);
    (
        Run {
            code,
            stdout,
            stderr,
        },
        peak,
    )
}

/// Runs `jelly args…` (no stdin) and asserts a usage error: exit 2 with `needle` in the
/// message.
pub fn usage_error(args: &[&str], needle: &str) {
    let r = jelly(args, None);
    assert_eq!(r.code, 2, "jelly {args:?}: {}", r.stderr);
    assert!(r.stderr.contains(needle), "jelly {args:?}: {}", r.stderr);
}

/// Runs and asserts success.
pub fn ok(args: &[&str], stdin: Option<&[u8]>) -> Run {
    let r = jelly(args, stdin);
    assert_eq!(r.code, 0, "jelly {args:?} failed: {}", r.stderr);
    r
}

/// A dataset file.
pub fn dataset(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/datasets")
        .join(rel)
}

/// A fresh temporary folder for one test, removed when the test passes (a failed
/// test keeps it, to look at).
pub fn tmp(name: &str) -> TmpDir {
    TmpDir::new(&format!("jelly-cli-test-{}-{name}", std::process::id()))
}

/// A folder under the system's temporary folder, made empty, and removed on drop
/// unless the thread is panicking.
pub struct TmpDir(PathBuf);

impl TmpDir {
    pub fn new(name: &str) -> TmpDir {
        let d = std::env::temp_dir().join(name);
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("tmp dir");
        TmpDir(d)
    }
}

impl std::ops::Deref for TmpDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for TmpDir {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for TmpDir {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// The first `n` lines of a dataset file, written to `dir/name`.
pub fn head(rel: &str, n: usize, dir: &Path, name: &str) -> PathBuf {
    let text = std::fs::read_to_string(dataset(rel)).expect("dataset");
    let mut s: String = text.lines().take(n).collect::<Vec<_>>().join("\n");
    s.push('\n');
    let p = dir.join(name);
    std::fs::write(&p, s).expect("write head");
    p
}

/// Path as &str.
pub fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// Parses N-Triples / N-Quads text.
pub fn parse(bytes: &[u8]) -> Vec<Statement> {
    jelly::nquads::parse_document(std::str::from_utf8(bytes).expect("utf-8"))
        .expect("valid N-Quads")
}

/// Asserts two statement lists are isomorphic datasets.
pub fn assert_iso(a: &[Statement], b: &[Statement], what: &str) {
    if jelly::iso::normalize(a) == jelly::iso::normalize(b) {
        return;
    }
    let r = jelly::iso::isomorphic(a, b);
    assert!(r.is_iso(), "{what}: not isomorphic: {r:?}");
}

/// Decodes a Jelly file with the library, one Vec per frame.
pub fn frames(path: &Path) -> Vec<Vec<Statement>> {
    let bytes = std::fs::read(path).expect("read jelly");
    jelly::JellyReader::new(&bytes[..])
        .read_all_frames()
        .expect("decodes")
}
