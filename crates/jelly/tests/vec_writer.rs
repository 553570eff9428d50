//! `JellyWriterBuilder::build_vec` (frames encoded in place at the end of a `Vec<u8>`)
//! writes the same bytes as `build` (frames copied into a `Write`), whatever the frame
//! sizes do to the length prefix's size.

use jelly::{
    FramePolicy, JellyReader, JellyWriterBuilder, LogicalType, PhysicalType, Statement,
    StatementRef, StreamOptions, TermRef, WriteError,
};

/// Statements whose objects grow and shrink, so that frames (cut by the given policy or
/// by `cuts`) have 1-, 2- and 3-byte length prefixes in every order.
fn statements() -> Vec<Statement> {
    let sizes = [1usize, 10, 200, 5, 20_000, 3, 150, 70_000, 2, 400, 9];
    let mut v = Vec::new();
    for (i, n) in sizes.iter().enumerate() {
        let lex = "x".repeat(*n);
        let s = format!("http://ex.org/s{i}");
        v.push(
            StatementRef::triple(
                TermRef::Iri(&s),
                TermRef::Iri("http://ex.org/p"),
                TermRef::Literal(jelly::LiteralRef {
                    lex: &lex,
                    kind: jelly::LiteralKind::Simple,
                }),
            )
            .to_owned(),
        );
    }
    v
}

fn builder(policy: FramePolicy) -> JellyWriterBuilder {
    JellyWriterBuilder::new(
        StreamOptions::small()
            .with_physical_type(PhysicalType::Triples)
            .with_logical_type(LogicalType::FLAT_TRIPLES),
    )
    .frame_policy(policy)
}

/// Writes `sts` with writer `w` (either kind: they have the same methods but no common
/// trait), ending a frame with metadata after every `cut_every`-th statement (0: never).
macro_rules! write_all {
    ($w:expr, $sts:expr, $cut_every:expr) => {{
        let mut w = $w;
        let cut_every: usize = $cut_every;
        for (i, s) in $sts.iter().enumerate() {
            w.add(s.as_ref()).unwrap();
            if cut_every > 0 && i % cut_every == 0 {
                w.encoder().set_frame_metadata("i", i.to_string());
                w.flush_frame().unwrap();
            }
        }
        w.finish().unwrap();
    }};
}

fn copied(b: JellyWriterBuilder, sts: &[Statement], cut_every: usize) -> Vec<u8> {
    let mut out = Vec::new();
    write_all!(b.build(&mut out).unwrap(), sts, cut_every);
    out
}

fn in_place(b: JellyWriterBuilder, sts: &[Statement], cut_every: usize, out: &mut Vec<u8>) {
    write_all!(b.build_vec(out).unwrap(), sts, cut_every);
}

#[test]
fn in_place_frames_are_the_bytes_of_copied_frames() {
    let sts = statements();
    for (policy, cut_every) in [
        (FramePolicy::Rows(1), 0),
        (FramePolicy::Rows(2), 0),
        (FramePolicy::Rows(3), 0),
        (FramePolicy::Manual, 1),
        (FramePolicy::Manual, 2),
        (FramePolicy::Manual, 0),
    ] {
        let expected = copied(builder(policy), &sts, cut_every);
        let mut out = b"earlier output".to_vec();
        in_place(builder(policy), &sts, cut_every, &mut out);
        assert_eq!(&out[..14], b"earlier output", "{policy:?} {cut_every}");
        assert!(out[14..] == expected[..], "{policy:?} {cut_every}");
        // And it reads back as the statements.
        let mut n = 0;
        JellyReader::from_slice(&out[14..])
            .for_each_event(|_, ev| n += matches!(ev, jelly::Event::Statement(_)) as usize)
            .unwrap();
        assert_eq!(n, sts.len());
    }
}

#[test]
fn reusing_the_output_vec_gives_the_same_bytes() {
    let sts = statements();
    let expected = copied(builder(FramePolicy::Rows(2)), &sts, 0);
    let mut out = Vec::new();
    for _ in 0..3 {
        out.clear();
        in_place(builder(FramePolicy::Rows(2)), &sts, 0, &mut out);
        assert!(out == expected);
    }
}

#[test]
fn non_delimited_output_is_one_frame_and_refuses_a_second() {
    let sts = statements();
    let b = builder(FramePolicy::Manual).delimited(false);
    let expected = copied(b.clone(), &sts, 0);
    let mut out = Vec::new();
    in_place(b.clone(), &sts, 0, &mut out);
    assert!(out == expected);

    let mut out = Vec::new();
    let mut w = b.build_vec(&mut out).unwrap();
    w.add(sts[0].as_ref()).unwrap();
    w.flush_frame().unwrap();
    w.add(sts[1].as_ref()).unwrap();
    assert!(matches!(
        w.flush_frame(),
        Err(WriteError::SecondFrameNonDelimited)
    ));
}

#[test]
fn dropping_the_writer_keeps_finished_frames_only() {
    let sts = statements();
    let mut first = Vec::new();
    {
        let mut w = builder(FramePolicy::Manual).build(&mut first).unwrap();
        w.add(sts[0].as_ref()).unwrap();
        w.flush_frame().unwrap();
    }
    let mut out = b"x".to_vec();
    {
        let mut w = builder(FramePolicy::Manual).build_vec(&mut out).unwrap();
        w.add(sts[0].as_ref()).unwrap();
        w.flush_frame().unwrap();
        w.add(sts[4].as_ref()).unwrap(); // never finished
        assert_eq!(w.frames_written(), 1);
        assert_eq!(w.bytes_written() as usize, first.len());
    }
    assert_eq!(out[0], b'x');
    assert!(out[1..] == first[..]);
}

#[test]
fn the_encoders_own_frame_calls_work_in_place_too() {
    // `encoder()` hands out the encoder: finishing a frame through it must take that
    // frame's rows only, not the output before it.
    let sts = statements();
    let mut out = b"head".to_vec();
    let mut w = builder(FramePolicy::Manual).build_vec(&mut out).unwrap();
    w.add(sts[0].as_ref()).unwrap();
    w.flush_frame().unwrap();
    let written = w.bytes_written() as usize;
    w.add(sts[1].as_ref()).unwrap();
    let frame = w.encoder().finish_frame();
    assert_eq!(w.encoder().frame_bytes(), 0);
    drop(w);
    assert_eq!(out.len(), 4 + written);
    let mut ref_enc = jelly::Encoder::new(
        StreamOptions::small()
            .with_physical_type(PhysicalType::Triples)
            .with_logical_type(LogicalType::FLAT_TRIPLES),
    )
    .unwrap();
    ref_enc.add(sts[0].as_ref()).unwrap();
    let _ = ref_enc.finish_frame();
    ref_enc.add(sts[1].as_ref()).unwrap();
    assert_eq!(frame, ref_enc.finish_frame());
}
