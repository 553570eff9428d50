//! Arbitrary bytes → `RdfPatchParser` (strict and generalized, small line cap) and the
//! structural validator. Every row that parses is written back with `RdfPatchWriter`,
//! and the written line must parse again to the same row. Must never panic or hang.
#![no_main]

#[path = "common/alloc_limit.rs"]
mod alloc_limit;

use jelly::rdf_patch::{PatchRow, RdfPatchParser, RdfPatchValidator, RdfPatchWriter, validate};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut sink = 0usize;
    for generalized in [false, true] {
        let mut p = RdfPatchParser::new(data)
            .generalized(generalized)
            .max_line_len(1 << 16);
        let mut v = RdfPatchValidator::new().allow_late_headers(generalized);
        let mut rows: Vec<PatchRow> = Vec::new();
        while let Some(row) = p.next() {
            match row {
                Ok(row) => {
                    if let Some(viol) = v.check(p.line(), &row) {
                        sink += viol.to_string().len();
                    }
                    rows.push(row);
                }
                Err(e) => {
                    sink += e.to_string().len() + e.line() + e.column().unwrap_or(0);
                    break;
                }
            }
        }
        if let Some(viol) = v.finish() {
            sink += viol.to_string().len();
        }
        // Writer round trip: what we parsed, we can write, and read back identically.
        let mut w = RdfPatchWriter::new(Vec::new());
        let mut written = Vec::new();
        for row in &rows {
            if w.write(row).is_ok() {
                written.push(row.clone());
            }
        }
        let text = w.finish().unwrap();
        let back: Vec<PatchRow> = RdfPatchParser::new(&text[..])
            .generalized(generalized)
            .collect::<Result<_, _>>()
            .unwrap_or_else(|e| panic!("re-parse failed: {e}\n{}", String::from_utf8_lossy(&text)));
        assert_eq!(back, written, "{}", String::from_utf8_lossy(&text));
    }
    if let Ok(found) = validate(data) {
        sink += found.len();
    }
    std::hint::black_box(sink);
});
