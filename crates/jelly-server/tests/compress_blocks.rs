//! Shared compressed blocks stitched into per-subscriber streams: every coding's
//! header + blocks + trailer must decode, from any starting block, with the Rust
//! decoders (gzip single-member, zstd streaming, brotli) and with independent ones
//! (GNU gzip, the reference zstd and brotli CLIs, Python's gzip module).
//!
//! A missing external tool fails the test. Outside CI (`CI` not `true`),
//! `JELLY_SKIP_INTEROP=1` turns that into a SKIPPED line instead.

use std::io::{Read, Write};
use std::process::{Command, Stdio};

use bytes::Bytes;
use jelly_server::compress::{Block, Encoding, Stitcher, compress_block, compress_grpc_message};

const COMPRESSED: [Encoding; 3] = [Encoding::Gzip, Encoding::Zstd, Encoding::Brotli];
const ALL: [Encoding; 4] = [
    Encoding::Identity,
    Encoding::Gzip,
    Encoding::Zstd,
    Encoding::Brotli,
];

/// xorshift64*: deterministic test data without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// RDF-like text: repeated IRIs and literals, the kind of redundancy Jelly output has.
fn rdf_like(len: usize, seed: u64) -> Vec<u8> {
    let mut rng = Rng(seed | 1);
    let mut out = Vec::with_capacity(len + 200);
    while out.len() < len {
        let s = rng.below(500);
        let p = rng.below(20);
        let o = rng.below(100_000);
        writeln!(
            out,
            "<http://example.org/resource/{s}> <http://example.org/vocab#p{p}> \"value {o}\"@en ."
        )
        .unwrap();
    }
    out.truncate(len);
    out
}

fn random_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut rng = Rng(seed | 1);
    (0..len).map(|_| rng.next() as u8).collect()
}

/// Raw batches covering the edge cases: empty, 1 byte, tiny, a repeat of the
/// previous batch (a back reference across blocks would be tempting and wrong),
/// 1 MiB compressible and 1 MiB incompressible.
fn raw_batches() -> Vec<Vec<u8>> {
    let item = rdf_like(900, 7);
    vec![
        item.clone(),
        Vec::new(),
        b"x".to_vec(),
        item.clone(),
        b"ab".to_vec(),
        rdf_like(1 << 20, 11),
        Vec::new(),
        random_bytes(1 << 20, 13),
        item,
        b"<".to_vec(),
        rdf_like(64 << 10, 17),
    ]
}

/// Header + `blocks` + trailer through one stitcher, as one body.
fn stitch(enc: Encoding, blocks: &[Block]) -> Vec<u8> {
    let mut s = Stitcher::new(enc);
    let mut body = s.header().to_vec();
    for b in blocks {
        let part = s.block(b);
        assert_eq!(part, b.data);
        if !b.data.is_empty() {
            assert_eq!(part.as_ptr(), b.data.as_ptr(), "shared bytes, not a copy");
        }
        body.extend_from_slice(&part);
    }
    body.extend_from_slice(&s.trailer());
    body
}

/// Decodes `body` with the Rust decoder for `enc`. For gzip the decoder reads one
/// member only, and the body must hold exactly that member.
fn decode(enc: Encoding, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    match enc {
        Encoding::Identity => out.extend_from_slice(body),
        Encoding::Gzip => {
            let mut d = flate2::read::GzDecoder::new(body);
            d.read_to_end(&mut out).expect("gzip decodes");
            assert!(d.into_inner().is_empty(), "bytes after the gzip member");
        }
        Encoding::Zstd => {
            zstd::stream::read::Decoder::new(body)
                .unwrap()
                .read_to_end(&mut out)
                .expect("zstd decodes");
        }
        Encoding::Brotli => {
            let mut d = brotli::Decompressor::new(body, 4096);
            d.read_to_end(&mut out).expect("brotli decodes");
            assert!(d.into_inner().is_empty(), "bytes after the brotli stream");
        }
    }
    out
}

fn assert_same(decoded: &[u8], expected: &[u8], what: &str) {
    assert!(
        decoded == expected,
        "{what}: decoded {} bytes, expected {} bytes (first difference at {:?})",
        decoded.len(),
        expected.len(),
        decoded.iter().zip(expected).position(|(a, b)| a != b)
    );
}

#[test]
fn every_coding_round_trips_header_blocks_trailer() {
    let raws = raw_batches();
    let expected = raws.concat();
    for enc in ALL {
        let blocks: Vec<Block> = raws.iter().map(|r| compress_block(enc, r)).collect();
        for (b, r) in blocks.iter().zip(&raws) {
            assert_eq!(b.raw_len, r.len() as u64);
            assert_eq!(b.crc32, crc32fast::hash(r));
            assert_eq!(b.data.is_empty(), r.is_empty(), "{enc:?}");
        }
        let body = stitch(enc, &blocks);
        assert_same(&decode(enc, &body), &expected, enc.name());
        if enc != Encoding::Identity {
            let compressible = &blocks[5];
            assert!(
                compressible.data.len() < (1 << 20) / 3,
                "{enc:?}: 1 MiB of RDF-like text took {} bytes",
                compressible.data.len()
            );
        }
    }
}

#[test]
fn a_stream_with_no_blocks_or_only_empty_blocks_decodes_to_nothing() {
    for enc in ALL {
        let empty = compress_block(enc, b"");
        for body in [stitch(enc, &[]), stitch(enc, &[empty.clone(), empty])] {
            assert!(decode(enc, &body).is_empty(), "{enc:?}");
            if enc != Encoding::Identity {
                assert!(
                    !body.is_empty(),
                    "{enc:?}: an empty body is no valid stream"
                );
            }
        }
    }
}

#[test]
fn subscribers_joining_at_different_blocks_share_the_same_bytes() {
    let raws = raw_batches();
    for enc in ALL {
        let blocks: Vec<Block> = raws.iter().map(|r| compress_block(enc, r)).collect();
        // Every joining point, each stream decoded on its own.
        for join in 0..blocks.len() {
            let body = stitch(enc, &blocks[join..]);
            assert_same(
                &decode(enc, &body),
                &raws[join..].concat(),
                &format!("{} joined at {join}", enc.name()),
            );
        }
    }
}

#[test]
fn many_small_blocks_in_shuffled_orders_and_join_points() {
    // Small batches built from the same few items, so a compressor that reached
    // into an earlier block would find matches everywhere.
    let items: Vec<Vec<u8>> = (0..6).map(|i| rdf_like(50 + 300 * i, i as u64)).collect();
    let mut rng = Rng(99);
    let raws: Vec<Vec<u8>> = (0..120)
        .map(|_| {
            let n = rng.below(4);
            (0..n)
                .flat_map(|_| items[rng.below(items.len())].clone())
                .collect()
        })
        .collect();
    for enc in COMPRESSED {
        let blocks: Vec<Block> = raws.iter().map(|r| compress_block(enc, r)).collect();
        for _ in 0..10 {
            let join = rng.below(blocks.len());
            let order: Vec<usize> = (join..blocks.len()).filter(|_| rng.below(3) > 0).collect();
            let picked: Vec<Block> = order.iter().map(|&i| blocks[i].clone()).collect();
            let expected: Vec<u8> = order.iter().flat_map(|&i| raws[i].clone()).collect();
            let body = stitch(enc, &picked);
            assert_same(&decode(enc, &body), &expected, enc.name());
        }
    }
}

#[test]
fn grpc_messages_are_standard_gzip_and_zstd_payloads() {
    for msg in [
        Vec::new(),
        b"x".to_vec(),
        rdf_like(900, 3),
        rdf_like(300_000, 5),
    ] {
        let gz = compress_grpc_message(Encoding::Gzip, &msg);
        assert_same(&decode(Encoding::Gzip, &gz), &msg, "grpc gzip");
        let zst = compress_grpc_message(Encoding::Zstd, &msg);
        assert_same(&zstd::decode_all(&zst[..]).unwrap(), &msg, "grpc zstd");
        if msg.len() > 100 {
            assert!(gz.len() < msg.len() && zst.len() < msg.len());
        }
        // No gRPC name: sent as it is.
        for enc in [Encoding::Identity, Encoding::Brotli] {
            assert_eq!(compress_grpc_message(enc, &msg), Bytes::from(msg.clone()));
        }
    }
}

/// Runs an external decoder with `body` on stdin and returns its stdout, or `None`
/// (after a SKIPPED line) when the tool is missing and skipping is allowed.
fn external(program: &str, args: &[&str], body: &[u8]) -> Option<Vec<u8>> {
    let child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => {
            let in_ci = std::env::var("CI").is_ok_and(|v| v == "true");
            let skip = std::env::var("JELLY_SKIP_INTEROP").is_ok_and(|v| v == "1");
            if skip && !in_ci {
                eprintln!("SKIPPED {program}: cannot run it: {e}");
                return None;
            }
            panic!(
                "cannot run {program}: {e}\n(scripts/test.sh installs it; set JELLY_SKIP_INTEROP=1 outside CI to skip)"
            );
        }
    };
    let mut stdin = child.stdin.take().unwrap();
    let body = body.to_vec();
    // Write from another thread: the tool's stdout fills while we feed its stdin.
    let writer = std::thread::spawn(move || stdin.write_all(&body));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(
        out.status.success(),
        "`{program} {}` failed ({}): {}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    Some(out.stdout)
}

#[test]
fn independent_decoders_accept_stitched_streams() {
    let raws = raw_batches();
    let python_gunzip =
        "import gzip, sys; sys.stdout.buffer.write(gzip.decompress(sys.stdin.buffer.read()))";
    let tools: [(Encoding, &str, &[&str]); 4] = [
        (Encoding::Gzip, "gzip", &["-dc"]),
        (Encoding::Gzip, "python3", &["-c", python_gunzip]),
        (Encoding::Zstd, "zstd", &["-dc"]),
        (Encoding::Brotli, "brotli", &["-dc"]),
    ];
    for (enc, program, args) in tools {
        let blocks: Vec<Block> = raws.iter().map(|r| compress_block(enc, r)).collect();
        for join in [0, 3, blocks.len() - 1, blocks.len()] {
            let body = stitch(enc, &blocks[join..]);
            let Some(decoded) = external(program, args, &body) else {
                break;
            };
            assert_same(
                &decoded,
                &raws[join..].concat(),
                &format!("{program} on {} joined at {join}", enc.name()),
            );
        }
    }
}

/// Serves one HTTP/1.1 response on a loopback port: `parts` as chunks of a
/// chunked body with the given `Content-Encoding`, as the server streams them.
fn serve_once(parts: Vec<Bytes>, content_encoding: &'static str) -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().unwrap();
        let mut request = Vec::new();
        let mut byte = [0u8; 1];
        while !request.ends_with(b"\r\n\r\n") {
            if conn.read(&mut byte).unwrap() == 0 {
                return;
            }
            request.push(byte[0]);
        }
        let head = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Encoding: {content_encoding}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
        );
        conn.write_all(head.as_bytes()).unwrap();
        for p in parts.iter().filter(|p| !p.is_empty()) {
            conn.write_all(format!("{:x}\r\n", p.len()).as_bytes())
                .unwrap();
            conn.write_all(p).unwrap();
            conn.write_all(b"\r\n").unwrap();
        }
        conn.write_all(b"0\r\n\r\n").unwrap();
    });
    port
}

#[test]
fn curl_compressed_decodes_stitched_http_bodies() {
    let raws = raw_batches();
    for enc in COMPRESSED {
        let blocks: Vec<Block> = raws.iter().map(|r| compress_block(enc, r)).collect();
        let join = 3;
        let mut s = Stitcher::new(enc);
        let mut parts = vec![s.header()];
        parts.extend(blocks[join..].iter().map(|b| s.block(b)));
        parts.push(s.trailer());
        let port = serve_once(parts, enc.content_encoding().unwrap());
        let url = format!("http://127.0.0.1:{port}/");
        let Some(decoded) = external(
            "curl",
            &["-sS", "--compressed", "--max-time", "20", &url],
            b"",
        ) else {
            return;
        };
        assert_same(
            &decoded,
            &raws[join..].concat(),
            &format!("curl --compressed on {}", enc.name()),
        );
    }
}
