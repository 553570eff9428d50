//! `jelly patch from-jelly`: Jelly-Patch in, RDF Patch text out, row by row.

use std::cell::RefCell;
use std::io::Write;
use std::rc::Rc;

use jelly::rdf_patch::{PatchRowRef, RdfPatchWriter};

use super::args::{PatchFormat, PatchFromJellyArgs, Separator};
use super::common::{Op, detect, read_binary, text_write_err};
use crate::common::FrameRange;
use crate::error::{CliError, CliResult};
use crate::io::{Output, Progress, display_name, open_input, open_output};

/// Runs the command.
pub fn run(args: &PatchFromJellyArgs, quiet: bool) -> CliResult {
    let in_path = args.input.as_deref().unwrap_or("-");
    let range = match &args.take_frames {
        Some(r) => FrameRange::parse(r)?,
        None => FrameRange::ALL,
    };
    let mut input = open_input(in_path)?;
    let name = input.name.clone();
    // Empty input is reported as such below, not as text.
    if detect(&mut input, in_path, None)? == PatchFormat::Rdfp
        && !crate::patch::common::is_empty_input(&mut input)?
    {
        return Err(CliError::invalid(format!(
            "{name}: this looks like RDF Patch text, not Jelly-Patch (use `jelly patch to-jelly` to convert it)"
        )));
    }
    let out_name = display_name(args.to.as_deref().unwrap_or("-"), false);
    let shared = Rc::new(RefCell::new(open_output(args.to.as_deref())?));
    let mut w = RdfPatchWriter::new(Shared(shared.clone()));
    let mut raw = Shared(shared.clone());
    let io_err = |e: std::io::Error| CliError::io(&out_name, &e);
    let mut progress = Progress::new(quiet, input.bytes_read.clone());
    let next_patch = RefCell::new(0u64);
    let sep = args.separator;
    let mut end_patch = |w: &mut RdfPatchWriter<_>| -> CliResult {
        let patch = *next_patch.borrow();
        let res = match sep {
            Separator::Comment => {
                let line = format!("# end of patch {patch}\n");
                raw.write_all(line.as_bytes()).map_err(io_err)
            }
            Separator::Blank => raw.write_all(b"\n").map_err(io_err),
            Separator::Segment => w
                .write(PatchRowRef::Segment)
                .map_err(|e| text_write_err(e, &|| name.clone(), &out_name)),
            Separator::None => Ok(()),
        };
        *next_patch.borrow_mut() += 1;
        res
    };
    let r = read_binary(
        input.reader,
        &name,
        range,
        &mut progress,
        false,
        |loc, op| match op {
            Op::Row { row: r, .. } => w
                .write(r)
                .map_err(|e| text_write_err(e, &|| loc.at(&name), &out_name)),
            Op::Punctuation => end_patch(&mut w),
            Op::FrameEnd { patch_end, .. } if patch_end => end_patch(&mut w),
            Op::FrameEnd { .. } => Ok(()),
            // Patches are numbered as in the whole stream: those of the frames before
            // the range taken are counted too.
            Op::FrameSkipped {
                index,
                stats,
                patch_end,
            } => {
                *next_patch.borrow_mut() = if patch_end {
                    index + 1
                } else {
                    stats.punctuations
                };
                Ok(())
            }
        },
    );
    progress.finish();
    r?;
    w.finish().map_err(|e| CliError::io(&out_name, &e))?;
    drop(raw);
    let out = Rc::try_unwrap(shared)
        .map_err(|_| CliError::invalid(format!("{out_name}: output still in use")))?
        .into_inner();
    out.finish().map_err(|e| CliError::io(&out_name, &e))
}

/// The output, shared by the row writer and the separator lines.
struct Shared(Rc<RefCell<Output>>);

impl Write for Shared {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.borrow_mut().write(buf)
    }
    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        self.0.borrow_mut().write_all(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.0.borrow_mut().flush()
    }
}
