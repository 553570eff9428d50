//! Checks that read an input piece by piece ahead of its parser
//! ([`crate::text_nesting::NestingScanner`], [`crate::xml_guard::XmlGuard`]), and the
//! reader that runs one over a stream.

use std::io::{self, Read};

/// A check fed the input in pieces, in order, that refuses it once it sees too much.
pub trait InputCheck {
    /// Why the input is refused.
    type Error: std::error::Error + Send + Sync + 'static;

    /// Reads the next piece of the input.
    fn feed(&mut self, bytes: &[u8]) -> Result<(), Self::Error>;
}

/// A reader that passes what it reads through a check: refused input ends in an
/// [`io::ErrorKind::InvalidData`] error, before a parser reading from it gets there.
///
/// ```
/// use std::io::Read;
/// use jelly::input_check::CheckedReader;
/// use jelly::text_nesting::NestingScanner;
/// let deep = "<s> <p> <<( <a> <b> <<( <c> <d> <e> )>> )>> .";
/// let mut out = String::new();
/// let e = CheckedReader::new(deep.as_bytes(), NestingScanner::new(1))
///     .read_to_string(&mut out)
///     .unwrap_err();
/// assert_eq!(e.kind(), std::io::ErrorKind::InvalidData);
/// assert!(e.to_string().contains("deeper than 1"));
/// ```
pub struct CheckedReader<R, C> {
    inner: R,
    check: C,
}

impl<R, C> CheckedReader<R, C> {
    /// `inner`, read through `check`.
    pub fn new(inner: R, check: C) -> CheckedReader<R, C> {
        CheckedReader { inner, check }
    }
}

impl<R: Read, C: InputCheck> Read for CheckedReader<R, C> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.check
            .feed(&buf[..n])
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        Ok(n)
    }
}
