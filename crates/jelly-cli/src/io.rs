//! Opening inputs and outputs: stdin/stdout for `-`, gzip and zstd detected by magic
//! bytes on input and chosen by extension on output, and the progress bar.

use std::cell::Cell;
use std::fs::{self, File};
use std::io::{self, BufRead, BufReader, BufWriter, IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::error::{CliError, CliResult};

/// Display name of an input or output path (`-` is `<stdin>` / `<stdout>`).
pub fn display_name(path: &str, stdin: bool) -> String {
    if path == "-" {
        if stdin { "<stdin>" } else { "<stdout>" }.to_string()
    } else {
        path.to_string()
    }
}

/// Counts the bytes read through it: before decompression, for the progress bar; under
/// a parser whose errors tell no position, to say how far into the input it was.
pub struct Counting<R> {
    inner: R,
    count: Rc<Cell<u64>>,
}

impl<R> Counting<R> {
    /// `inner`, adding the bytes read to `count`.
    pub fn new(inner: R, count: Rc<Cell<u64>>) -> Counting<R> {
        Counting { inner, count }
    }
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count.set(self.count.get() + n as u64);
        Ok(n)
    }
}

/// Compression of a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Zstd,
}

impl Compression {
    /// The compression a file starting with `head` has, by the gzip and zstd magic
    /// bytes.
    ///
    /// ```
    /// use jelly_cli::io::Compression;
    /// assert_eq!(Compression::of_start(&[0x1f, 0x8b, 8]), Compression::Gzip);
    /// assert_eq!(Compression::of_start(b"<http"), Compression::None);
    /// ```
    pub fn of_start(head: &[u8]) -> Compression {
        if head.starts_with(&[0x1f, 0x8b]) {
            Compression::Gzip
        } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
            Compression::Zstd
        } else {
            Compression::None
        }
    }
}

/// The error of opening input `path` (`name` in messages): an I/O error (exit 2).
///
/// `--opt.rdf-star true` (the value after a space, as many CLIs take it) makes `true`
/// an input file, since these flags take their value after `=` only: a missing `true`
/// or `false` says so, rather than only that no such file exists.
pub fn open_error(path: &str, name: &str, e: &io::Error) -> CliError {
    match e.kind() {
        io::ErrorKind::NotFound if matches!(path, "true" | "false") => CliError::usage(format!(
            "{name}: {e}; a flag that takes true or false (--opt.rdf-star, \
             --opt.generalized-statements, --delimited) takes it after `=`, as in \
             --opt.rdf-star={path}: after a space it is read as an input file"
        )),
        _ => CliError::io(name, e),
    }
}

/// Opens the file `path` for reading (named `name` in messages); a directory is a
/// usage error rather than a read error later.
fn open_file(path: &str, name: &str) -> CliResult<File> {
    let f = File::open(path).map_err(|e| open_error(path, name, &e))?;
    if f.metadata().map(|m| m.is_dir()).unwrap_or(false) {
        return Err(CliError::usage(format!("{name}: is a directory")));
    }
    Ok(f)
}

/// An opened input.
pub struct Input {
    /// Name for messages.
    pub name: String,
    /// The (decompressed) bytes.
    pub reader: Box<dyn BufRead>,
    /// Raw bytes read so far.
    pub bytes_read: Rc<Cell<u64>>,
    /// Compression found by magic bytes.
    pub compression: Compression,
}

impl Input {
    /// Skips a UTF-8 byte-order mark at the start of a text input: editors on some
    /// systems write one, and the RDF syntaxes do not allow it where a statement
    /// begins. (Not for Jelly input, whose first bytes are binary.)
    pub fn skip_bom(&mut self) -> CliResult {
        let start = self
            .reader
            .fill_buf()
            .map_err(|e| crate::common::input_io_err(&self.name, e))?;
        if start.starts_with(b"\xEF\xBB\xBF") {
            self.reader.consume(3);
        }
        Ok(())
    }
}

/// Bytes of an input read before anything looks at it: what the sniffers need (the
/// compression magic, Jelly's delimiting, text or binary), whatever size the first
/// read of a pipe happens to return.
const SNIFF_BYTES: usize = 64;

/// A reader whose first [`SNIFF_BYTES`] bytes (fewer only at the end of the input)
/// were read ahead, so that the first `fill_buf` of a `BufReader` over it returns them
/// all: a pipe or socket may deliver one byte first, and a sniffer given that byte
/// alone would guess wrong. An error met while reading ahead is returned by the read
/// that reaches it, as it would have been.
struct ReadAhead<R> {
    head: Vec<u8>,
    pos: usize,
    err: Option<io::Error>,
    inner: R,
}

impl<R: Read> ReadAhead<R> {
    fn new(mut inner: R) -> Self {
        let mut head = Vec::with_capacity(SNIFF_BYTES);
        let mut err = None;
        while head.len() < SNIFF_BYTES {
            let mut buf = [0u8; SNIFF_BYTES];
            match inner.read(&mut buf[..SNIFF_BYTES - head.len()]) {
                Ok(0) => break,
                Ok(n) => head.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    err = Some(e);
                    break;
                }
            }
        }
        ReadAhead {
            head,
            pos: 0,
            err,
            inner,
        }
    }
}

impl<R: Read> Read for ReadAhead<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.pos < self.head.len() {
            let n = buf.len().min(self.head.len() - self.pos);
            buf[..n].copy_from_slice(&self.head[self.pos..self.pos + n]);
            self.pos += n;
            if self.pos == self.head.len() {
                self.head = Vec::new();
                self.pos = 0;
            }
            return Ok(n);
        }
        if let Some(e) = self.err.take() {
            return Err(e);
        }
        self.inner.read(buf)
    }
}

/// Opens `path` (`-` for stdin), transparently decompressing gzip and zstd. The
/// reader's first `fill_buf` holds the input's first 64 bytes (all of it if shorter),
/// compressed or not, for the callers that sniff a format.
pub fn open_input(path: &str) -> CliResult<Input> {
    let name = display_name(path, true);
    let raw: Box<dyn Read> = if path == "-" {
        Box::new(io::stdin().lock())
    } else {
        Box::new(open_file(path, &name)?)
    };
    let count = Rc::new(Cell::new(0));
    let mut buffered = BufReader::with_capacity(
        256 * 1024,
        Counting::new(ReadAhead::new(raw), count.clone()),
    );
    let head = buffered.fill_buf().map_err(|e| CliError::io(&name, &e))?;
    let compression = Compression::of_start(head);
    let reader: Box<dyn BufRead> = match compression {
        Compression::None => Box::new(buffered),
        Compression::Gzip => Box::new(BufReader::with_capacity(
            256 * 1024,
            ReadAhead::new(flate2::bufread::MultiGzDecoder::new(buffered)),
        )),
        Compression::Zstd => {
            let d = zstd::Decoder::with_buffer(buffered).map_err(|e| CliError::io(&name, &e))?;
            Box::new(BufReader::with_capacity(256 * 1024, ReadAhead::new(d)))
        }
    };
    Ok(Input {
        name,
        reader,
        bytes_read: count,
        compression,
    })
}

/// An input read as it is stored, compressed or not (for sending it on as it is).
pub struct RawInput {
    /// Name for messages.
    pub name: String,
    /// Compression found by magic bytes.
    pub compression: Compression,
    /// The first bytes, read to find the compression.
    pub head: Vec<u8>,
    /// The bytes after `head`.
    pub rest: Box<dyn Read + Send>,
}

/// Opens `path` (`-` for stdin) without decompressing it: its first bytes tell the
/// compression (gzip and zstd magic), and the bytes are read on as they are, so a
/// caller can forward them in bounded memory.
///
/// ```no_run
/// let raw = jelly_cli::io::open_raw("data.nq.gz").unwrap();
/// assert_eq!(raw.compression, jelly_cli::io::Compression::Gzip);
/// ```
pub fn open_raw(path: &str) -> CliResult<RawInput> {
    let name = display_name(path, true);
    let rest: Box<dyn Read + Send> = if path == "-" {
        Box::new(io::stdin())
    } else {
        Box::new(open_file(path, &name)?)
    };
    let mut head = Vec::with_capacity(4);
    let mut rest = rest;
    // `take(4).read_to_end`: up to four bytes, fewer only at the end of the input.
    (&mut rest)
        .take(4)
        .read_to_end(&mut head)
        .map_err(|e| CliError::io(&name, &e))?;
    let compression = Compression::of_start(&head);
    Ok(RawInput {
        name,
        compression,
        head,
        rest,
    })
}

/// Strips `.gz`, `.gzip`, `.zst` or `.zstd` from a file name, and says which it was.
pub fn strip_compression(path: &str) -> (&str, Compression) {
    let lower = path.to_ascii_lowercase();
    for (ext, c) in [
        (".gz", Compression::Gzip),
        (".gzip", Compression::Gzip),
        (".zst", Compression::Zstd),
        (".zstd", Compression::Zstd),
    ] {
        if lower.ends_with(ext) {
            return (&path[..path.len() - ext.len()], c);
        }
    }
    (path, Compression::None)
}

/// An output: a file or stdout, maybe compressed. Call [`Output::finish`] at the end.
///
/// A regular file is written under a temporary name beside it and renamed over it by
/// `finish`, so a command that fails (bad arguments, bad input halfway through) leaves
/// the file as it was, and an output that is also one of the inputs is read whole
/// before it is replaced.
pub struct Output {
    writer: Writer,
    pending: Option<PendingFile>,
}

enum Writer {
    Plain(BufWriter<Box<dyn Write>>),
    Gzip(flate2::write::GzEncoder<BufWriter<Box<dyn Write>>>),
    Zstd(zstd::Encoder<'static, BufWriter<Box<dyn Write>>>),
}

/// A temporary file that becomes `dest` on [`PendingFile::commit`], and is removed if
/// dropped before.
struct PendingFile {
    tmp: PathBuf,
    dest: PathBuf,
}

impl PendingFile {
    /// `tmp` as [`temp_beside`] made it (registered for removal on a signal).
    fn new(tmp: PathBuf, dest: PathBuf) -> PendingFile {
        PendingFile { tmp, dest }
    }

    fn commit(self) -> io::Result<()> {
        let r = fs::rename(&self.tmp, &self.dest);
        if r.is_ok() {
            crate::interrupt::unregister(&self.tmp);
            std::mem::forget(self);
        }
        r
    }
}

impl Drop for PendingFile {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.tmp);
        crate::interrupt::unregister(&self.tmp);
    }
}

impl Output {
    /// Flushes and closes the compression stream, then puts the file in place.
    pub fn finish(self) -> io::Result<()> {
        let mut inner = match self.writer {
            Writer::Plain(w) => w,
            Writer::Gzip(g) => g.finish()?,
            Writer::Zstd(z) => z.finish()?,
        };
        inner.flush()?;
        drop(inner);
        match self.pending {
            Some(p) => p.commit(),
            None => Ok(()),
        }
    }
}

impl Write for Output {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match &mut self.writer {
            Writer::Plain(w) => w.write(buf),
            Writer::Gzip(w) => w.write(buf),
            Writer::Zstd(w) => w.write(buf),
        }
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        match &mut self.writer {
            Writer::Plain(w) => w.write_all(buf),
            Writer::Gzip(w) => w.write_all(buf),
            Writer::Zstd(w) => w.write_all(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match &mut self.writer {
            Writer::Plain(w) => w.flush(),
            Writer::Gzip(w) => w.flush(),
            Writer::Zstd(w) => w.flush(),
        }
    }
}

/// Opens `path` for writing (`-` or `None` for stdout); compression by extension. A
/// regular file (new or existing) is replaced only when [`Output::finish`] succeeds;
/// anything else (a device, a pipe) is written in place.
pub fn open_output(path: Option<&str>) -> CliResult<Output> {
    open(path, true)
}

/// [`open_output`] for output that must reach the file as it is written (a
/// subscription that runs until interrupted): the file is truncated and written in place.
pub fn open_output_live(path: Option<&str>) -> CliResult<Output> {
    open(path, false)
}

fn open(path: Option<&str>, replace_at_end: bool) -> CliResult<Output> {
    let path = path.unwrap_or("-");
    let name = display_name(path, false);
    let mut pending = None;
    let (raw, compression): (Box<dyn Write>, Compression) = if path == "-" {
        (Box::new(io::stdout().lock()), Compression::None)
    } else {
        check_output_path(path)?;
        // Through a symbolic link, the file it points to is the one replaced.
        let existing = fs::metadata(path).ok();
        let dest = match &existing {
            Some(_) => fs::canonicalize(path).ok(),
            // A dangling symbolic link is written through, as `File::create` does.
            None if fs::symlink_metadata(path).is_ok() => None,
            None => Some(PathBuf::from(path)),
        };
        let f = match (existing, dest) {
            (Some(m), _) if !m.is_file() => None,
            _ if !replace_at_end => None,
            (_, None) => None,
            (existing, Some(dest)) => match temp_beside(&dest) {
                Ok((f, tmp)) => {
                    if let Some(m) = &existing {
                        // Best effort: the replaced file's permissions carry over.
                        let _ = fs::set_permissions(&tmp, m.permissions());
                    }
                    pending = Some(PendingFile::new(tmp, dest));
                    Some(f)
                }
                // A folder we may not create files in, holding a file we may write:
                // written in place, as before.
                Err(e) if e.kind() == io::ErrorKind::PermissionDenied && existing.is_some() => None,
                Err(e) => return Err(CliError::io(&name, &e)),
            },
        };
        let f = match f {
            Some(f) => f,
            None => File::create(path).map_err(|e| CliError::io(&name, &e))?,
        };
        (Box::new(f), strip_compression(path).1)
    };
    wrap(raw, compression, &name, pending)
}

/// The checks [`open_output_live`] makes before it touches anything: the folder
/// exists and `path` is not a folder.
fn check_output_path(path: &str) -> CliResult<()> {
    if path == "-" {
        return Ok(());
    }
    let name = display_name(path, false);
    if let Some(dir) = Path::new(path).parent()
        && !dir.as_os_str().is_empty()
        && !dir.is_dir()
    {
        return Err(CliError::usage(format!(
            "{name}: folder {} does not exist",
            dir.display()
        )));
    }
    if fs::metadata(path).is_ok_and(|m| m.is_dir()) {
        return Err(CliError::usage(format!("{name}: is a directory")));
    }
    Ok(())
}

/// The checks [`open_output_live`] makes first (the folder exists, `path` is not a
/// folder), and that the file can be written: an existing file is
/// opened for writing without being changed; a missing one is made and removed
/// again. For a caller that opens the file later (only once there is something to
/// write), so that a path it cannot write is still refused at once.
pub fn check_output_writable(path: &str) -> CliResult<()> {
    check_output_path(path)?;
    if path == "-" {
        return Ok(());
    }
    let name = display_name(path, false);
    let io = |e: io::Error| CliError::io(&name, &e);
    if fs::metadata(path).is_ok() {
        fs::OpenOptions::new().write(true).open(path).map_err(io)?;
    } else if fs::symlink_metadata(path).is_err() {
        // (A dangling symbolic link is left to the open: checking it would make its
        // target.)
        fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)
            .map_err(io)?;
        fs::remove_file(path).map_err(io)?;
    }
    Ok(())
}

/// [`open_output_live`] adding to the end of the file `path` (made if missing)
/// instead of replacing it. A compressed file gets a new gzip member or zstd frame,
/// which readers take as the continuation of what is there.
pub fn open_output_append(path: &str) -> CliResult<Output> {
    let name = display_name(path, false);
    if fs::metadata(path).is_ok_and(|m| m.is_dir()) {
        return Err(CliError::usage(format!("{name}: is a directory")));
    }
    let f = fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .map_err(|e| CliError::io(&name, &e))?;
    wrap(Box::new(f), strip_compression(path).1, &name, None)
}

fn wrap(
    raw: Box<dyn Write>,
    compression: Compression,
    name: &str,
    pending: Option<PendingFile>,
) -> CliResult<Output> {
    let w = BufWriter::with_capacity(256 * 1024, raw);
    let writer = match compression {
        Compression::None => Writer::Plain(w),
        Compression::Gzip => Writer::Gzip(flate2::write::GzEncoder::new(
            w,
            flate2::Compression::default(),
        )),
        Compression::Zstd => {
            Writer::Zstd(zstd::Encoder::new(w, 3).map_err(|e| CliError::io(name, &e))?)
        }
    };
    Ok(Output { writer, pending })
}

/// A new file in the folder of `dest`, named after it (`.NAME.PID.N.tmp`).
fn temp_beside(dest: &Path) -> io::Result<(File, PathBuf)> {
    let dir = dest.parent().unwrap_or(Path::new("."));
    let base = dest
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut last = None;
    for n in 0..100u32 {
        let tmp = dir.join(format!(".{base}.{}.{n}.tmp", std::process::id()));
        // Registered before it exists, so that no signal finds it made but unknown.
        crate::interrupt::register(&tmp);
        match fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
        {
            Ok(f) => return Ok((f, tmp)),
            Err(e) => {
                crate::interrupt::unregister(&tmp);
                if e.kind() != io::ErrorKind::AlreadyExists {
                    return Err(e);
                }
                last = Some(e);
            }
        }
    }
    Err(last.unwrap_or_else(|| io::Error::other("no free temporary name")))
}

/// A progress line on stderr, shown only on a terminal and without `--quiet`.
pub struct Progress {
    bar: Option<ProgressBar>,
    bytes: Rc<Cell<u64>>,
    start: Instant,
    statements: u64,
}

impl Progress {
    /// A progress display counting `bytes` (raw input bytes).
    pub fn new(quiet: bool, bytes: Rc<Cell<u64>>) -> Self {
        let bar = (!quiet && io::stderr().is_terminal()).then(|| {
            let b = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
            if let Ok(style) = ProgressStyle::with_template("{spinner} {elapsed} {msg}") {
                b.set_style(style);
            }
            b
        });
        Progress {
            bar,
            bytes,
            start: Instant::now(),
            statements: 0,
        }
    }

    /// Switches to another input's byte counter.
    pub fn set_bytes(&mut self, bytes: Rc<Cell<u64>>) {
        self.bytes = bytes;
    }

    /// Counts one statement.
    #[inline]
    pub fn statement(&mut self) {
        self.statements += 1;
        if self.statements & 0x3fff == 0 {
            self.redraw();
        }
    }

    fn redraw(&self) {
        if let Some(b) = &self.bar {
            let secs = self.start.elapsed().as_secs_f64().max(1e-3);
            b.set_message(format!(
                "{} statements ({:.0}/s), {} read",
                self.statements,
                self.statements as f64 / secs,
                human_bytes(self.bytes.get())
            ));
            b.tick();
        }
    }

    /// Removes the progress line.
    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }

    /// Statements counted.
    pub fn statements(&self) -> u64 {
        self.statements
    }
}

/// `1.5 MiB`-style size.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut i = 0;
    while v >= 1024.0 && i + 1 < UNITS.len() {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[i])
    }
}
