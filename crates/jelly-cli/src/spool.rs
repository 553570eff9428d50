//! A temporary file that holds the `--per-frame` entries of `inspect` until the summary
//! printed before them is known, so that memory does not grow with the frame count.

use std::io::{self, Seek, SeekFrom, Write};
use std::path::PathBuf;

use crate::error::{CliError, CliResult};
use crate::io::{display_name, open_output};

/// What error messages call the spool.
pub const SPOOL_NAME: &str = "temporary file for --per-frame";

/// The spool file. On Unix it is unlinked at once, so an interrupted run leaves nothing
/// behind; where an open file cannot be removed, it is removed on drop.
pub struct Spool {
    file: io::BufWriter<std::fs::File>,
    path: Option<PathBuf>,
}

impl Spool {
    /// Creates the file in the system's temporary folder.
    pub fn create() -> CliResult<Spool> {
        let dir = std::env::temp_dir();
        let mut attempt = 0u32;
        loop {
            let path = dir.join(format!(
                "jelly-inspect-{}-{attempt}.tmp",
                std::process::id()
            ));
            match std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .open(&path)
            {
                Ok(f) => {
                    let path = std::fs::remove_file(&path).is_err().then_some(path);
                    return Ok(Spool {
                        file: io::BufWriter::new(f),
                        path,
                    });
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && attempt < 1000 => {
                    attempt += 1;
                }
                Err(e) => {
                    return Err(CliError::io(
                        &format!("{SPOOL_NAME} {}", path.display()),
                        &e,
                    ));
                }
            }
        }
    }

    /// Where the entries are written.
    pub fn writer(&mut self) -> &mut dyn Write {
        &mut self.file
    }

    /// Copies everything written so far to `out`.
    pub fn copy_to(&mut self, out: &mut dyn Write) -> io::Result<()> {
        self.file.flush()?;
        let f = self.file.get_mut();
        f.seek(SeekFrom::Start(0))?;
        io::copy(f, out)?;
        Ok(())
    }
}

impl Drop for Spool {
    fn drop(&mut self) {
        if let Some(p) = &self.path {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// Writes an `inspect` report to `to` (stdout for `None` or `-`): `head`, the spooled
/// `--per-frame` entries if any, then `tail`. Shared by `rdf inspect` and `patch inspect`.
pub fn write_report(
    to: Option<&str>,
    head: &str,
    spool: Option<&mut Spool>,
    tail: &str,
) -> CliResult {
    let out_name = display_name(to.unwrap_or("-"), false);
    let mut out = open_output(to)?;
    let written = (|| {
        out.write_all(head.as_bytes())?;
        if let Some(s) = spool {
            s.copy_to(&mut out)?;
        }
        out.write_all(tail.as_bytes())
    })();
    written.map_err(|e| CliError::io(&out_name, &e))?;
    out.finish().map_err(|e| CliError::io(&out_name, &e))
}
