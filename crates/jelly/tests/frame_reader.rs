//! `FrameReader` hands out the same frames, offsets and errors whether it reads from a
//! slice in place (`from_slice`), from a slice through `Read`, or from a reader that
//! returns a few bytes per call (frames straddling its buffer, growth, compaction).

use std::io::Read;

use jelly::{DecodeErrorKind, Delimiting, FrameReader};

/// A reader returning at most `step` bytes per call.
struct Trickle<'a> {
    data: &'a [u8],
    step: usize,
}

impl Read for Trickle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.step.min(buf.len()).min(self.data.len());
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Ok(n)
    }
}

/// Frames (bytes, index, offset) then the final error kind, if any.
type Outcome = (Vec<(Vec<u8>, u64, u64)>, Option<String>, u64);

fn collect<R: Read>(mut r: FrameReader<R>) -> Outcome {
    let mut frames = Vec::new();
    loop {
        match r.next_frame() {
            Ok(Some(f)) => frames.push((f.bytes.to_vec(), f.index, f.offset)),
            Ok(None) => return (frames, None, r.bytes_read()),
            Err(e) => return (frames, Some(format!("{e}")), r.bytes_read()),
        }
    }
}

fn all_ways(stream: &[u8], delimiting: Delimiting, max: u64) -> Outcome {
    let in_place = collect(FrameReader::from_slice(stream, delimiting, max));
    let through_read = collect(FrameReader::new(stream, delimiting, max));
    assert_eq!(in_place, through_read);
    for step in [1, 7, 4096, 70_000] {
        let trickled = collect(FrameReader::new(
            Trickle { data: stream, step },
            delimiting,
            max,
        ));
        assert_eq!(in_place, trickled, "step {step}");
    }
    in_place
}

fn varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A delimited stream of frames of these sizes (each frame's bytes are arbitrary: the
/// frame reader does not parse them; the first byte is not 0x0a so Auto sees "delimited").
fn delimited(sizes: &[usize]) -> (Vec<u8>, Vec<Vec<u8>>) {
    let mut out = Vec::new();
    let mut frames = Vec::new();
    for (i, &n) in sizes.iter().enumerate() {
        let f: Vec<u8> = (0..n).map(|j| (i * 31 + j * 7) as u8).collect();
        varint(n as u64, &mut out);
        out.extend_from_slice(&f);
        frames.push(f);
    }
    (out, frames)
}

#[test]
fn frames_of_every_size_come_out_whole_and_in_order() {
    let sizes = [
        3, 0, 200_000, 17, 40_000, 65_536, 65_535, 1, 100_000, 5, 131_072,
    ];
    let (stream, expected) = delimited(&sizes);
    let (frames, err, read) = all_ways(&stream, Delimiting::Delimited, 1 << 20);
    assert_eq!(err, None);
    assert_eq!(read, stream.len() as u64);
    let mut offset = 0u64;
    for (i, ((bytes, index, off), want)) in frames.iter().zip(&expected).enumerate() {
        let mut prefix = Vec::new();
        varint(want.len() as u64, &mut prefix);
        offset += prefix.len() as u64;
        assert_eq!(bytes, want, "frame {i}");
        assert_eq!(*index, i as u64);
        assert_eq!(*off, offset);
        offset += want.len() as u64;
    }
    assert_eq!(frames.len(), expected.len());
}

#[test]
fn truncated_frame_is_reported_with_what_was_there() {
    let (mut stream, _) = delimited(&[10, 50_000]);
    stream.truncate(stream.len() - 1234);
    let (frames, err, _) = all_ways(&stream, Delimiting::Delimited, 1 << 20);
    assert_eq!(frames.len(), 1);
    let err = err.expect("an error");
    let want = DecodeErrorKind::TruncatedFrame {
        expected: 50_000,
        got: 50_000 - 1234,
    };
    assert!(err.contains(&want.to_string()), "{err}");
}

#[test]
fn truncated_length_prefix_and_oversized_frames_are_errors() {
    // A length varint cut after its first byte.
    let (frames, err, _) = all_ways(&[3, 1, 2, 3, 0x80], Delimiting::Delimited, 1 << 20);
    assert_eq!(frames.len(), 1);
    assert!(err.is_some());
    // A declared length above the limit fails before anything is read for it.
    let mut stream = Vec::new();
    varint(5_000_000, &mut stream);
    stream.extend_from_slice(&[1, 2, 3]);
    let (frames, err, _) = all_ways(&stream, Delimiting::Delimited, 1 << 20);
    assert!(frames.is_empty());
    let want = DecodeErrorKind::FrameTooLarge {
        len: 5_000_000,
        max: 1 << 20,
    };
    assert!(err.expect("an error").contains(&want.to_string()));
}

#[test]
fn single_frame_input_is_read_whole_or_refused() {
    let body: Vec<u8> = std::iter::once(0x0a)
        .chain((0..90_000u32).map(|i| (i % 251) as u8))
        .collect();
    let (frames, err, read) = all_ways(&body, Delimiting::Single, 1 << 20);
    assert_eq!(err, None);
    assert_eq!(frames.len(), 1);
    assert_eq!(frames[0].0, body);
    assert_eq!(read, body.len() as u64);
    let (frames, err, _) = all_ways(&body, Delimiting::Single, 1000);
    assert!(frames.is_empty());
    assert!(err.is_some());
    let (_, err, _) = all_ways(&[], Delimiting::Single, 1000);
    let want = DecodeErrorKind::EmptyInput.to_string();
    assert!(err.expect("an error").contains(&want));
}

#[test]
fn autodetection_agrees_between_slice_and_reader() {
    // `0A NN` with NN != 0A: one non-delimited frame.
    let single = [0x0a, 0x02, 0x08, 0x01];
    let (frames, err, _) = all_ways(&single, Delimiting::Auto, 1 << 20);
    assert_eq!((frames.len(), err), (1, None));
    assert_eq!(frames[0].0, single);
    let (stream, _) = delimited(&[4, 4]);
    let (frames, err, _) = all_ways(&stream, Delimiting::Auto, 1 << 20);
    assert_eq!((frames.len(), err), (2, None));
    let (frames, err, _) = all_ways(&[], Delimiting::Auto, 1 << 20);
    assert_eq!((frames.len(), err), (0, None));
}

/// `largest_frame_bytes` of both writers is the length of the largest frame as a
/// reader sees it (no length prefix), delimited or not, for bodies on either side of
/// the varint's one- and two-byte boundaries.
#[test]
fn writers_report_the_largest_frame_as_readers_measure_it() {
    use jelly::{
        FramePolicy, JellyWriterBuilder, LiteralKind, LiteralRef, StatementRef, StreamOptions,
        TermRef,
    };
    for delimited in [true, false] {
        for extra in [0usize, 50, 90, 100, 110, 16_300, 16_400] {
            let lit = "x".repeat(extra);
            let st = StatementRef::triple(
                TermRef::Iri("http://a/s"),
                TermRef::Iri("http://a/p"),
                TermRef::Literal(LiteralRef {
                    lex: &lit,
                    kind: LiteralKind::Simple,
                }),
            );
            let b = JellyWriterBuilder::new(StreamOptions::big())
                .frame_policy(FramePolicy::Manual)
                .delimited(delimited);
            let mut out = Vec::new();
            let mut w = b.clone().build(&mut out).unwrap();
            w.add(st).unwrap();
            w.flush_frame().unwrap();
            let largest = w.largest_frame_bytes();
            w.finish().unwrap();
            let mut in_place = Vec::new();
            let mut v = b.build_vec(&mut in_place).unwrap();
            v.add(st).unwrap();
            v.flush_frame().unwrap();
            assert_eq!(v.largest_frame_bytes(), largest, "{delimited} {extra}");
            v.finish().unwrap();
            let d = if delimited {
                Delimiting::Delimited
            } else {
                Delimiting::Single
            };
            let (frames, err, _) = collect(FrameReader::from_slice(&out, d, u64::MAX));
            assert_eq!(err, None);
            let seen = frames.iter().map(|f| f.0.len() as u64).max().unwrap();
            assert_eq!(largest, seen, "delimited {delimited}, literal {extra}");
        }
    }
}
