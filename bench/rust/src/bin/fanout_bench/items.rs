//! The published items: consecutive statements of a dataset packed into one-frame
//! spliceable Jelly streams of about the requested size (Ztreamy's events were about
//! 900 bytes).

use std::path::Path;

use jelly::{Encoder, EncoderConfig, PhysicalType, Statement, StreamOptions};
use jelly_proto::wire::put_varint;

/// A pool of distinct items, each a delimited Jelly stream of one frame (a ready POST body).
pub struct Items {
    pub bodies: Vec<Vec<u8>>,
    pub physical: PhysicalType,
    /// Mean statements and bytes per item.
    pub statements: f64,
    pub bytes: f64,
}

fn encode(st: &[Statement], opts: &StreamOptions) -> Result<Vec<u8>, String> {
    let cfg = EncoderConfig {
        spliceable: true,
        ..EncoderConfig::default()
    };
    let mut enc = Encoder::with_config(opts.clone(), cfg).map_err(|e| e.to_string())?;
    for s in st {
        enc.add(s.as_ref()).map_err(|e| e.to_string())?;
    }
    Ok(enc.finish_frame())
}

/// Builds up to `count` items of about `target_bytes` each from the statements of `path`
/// (N-Triples / N-Quads), in file order.
pub fn build(path: &Path, target_bytes: usize, count: usize) -> Result<Items, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let all =
        jelly::nquads::parse_document(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let physical = if all.iter().any(|s| s.graph.is_some()) {
        PhysicalType::Quads
    } else {
        PhysicalType::Triples
    };
    let opts = StreamOptions::big().with_physical_type(physical);
    let mut bodies = Vec::new();
    let (mut n_st, mut n_bytes) = (0usize, 0usize);
    let mut start = 0;
    while bodies.len() < count && start < all.len() {
        // Grow the item one statement at a time until it reaches the target size.
        let mut end = start + 1;
        let mut frame = encode(&all[start..end], &opts)?;
        let mut prev: Option<Vec<u8>> = None;
        while frame.len() < target_bytes && end < all.len() {
            end += 1;
            prev = Some(std::mem::replace(
                &mut frame,
                encode(&all[start..end], &opts)?,
            ));
        }
        // Stop one statement short if that is nearer the target.
        if let Some(p) = prev
            && target_bytes.abs_diff(p.len()) < target_bytes.abs_diff(frame.len())
        {
            frame = p;
            end -= 1;
        }
        n_st += end - start;
        n_bytes += frame.len();
        let mut body = Vec::with_capacity(frame.len() + 3);
        put_varint(&mut body, frame.len() as u64);
        body.extend_from_slice(&frame);
        bodies.push(body);
        start = end;
    }
    if bodies.is_empty() {
        return Err(format!("{}: no statements", path.display()));
    }
    let k = bodies.len() as f64;
    Ok(Items {
        bodies,
        physical,
        statements: n_st as f64 / k,
        bytes: n_bytes as f64 / k,
    })
}
