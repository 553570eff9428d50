//! FileLog: round trips, reopen, read limits, torn-tail recovery, corruption,
//! retention, concurrency, timestamps.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use jelly_server::item::{Item, NewItem};
use jelly_server::log::{Clock, Durability, FileLog, FileLogOptions, Log, LogError, ReadLimits};

struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        static N: AtomicU64 = AtomicU64::new(0);
        let p = std::env::temp_dir().join(format!(
            "jelly-log-file-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&p);
        fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// Item number `i`: its payload says which it is, so a mix-up is detected.
fn item(i: u64) -> NewItem {
    let mut frame = format!("frame-{i}:").into_bytes();
    frame.extend((0..(i % 37) * 3).map(|k| (k as u8).wrapping_mul(31) ^ i as u8));
    NewItem {
        frame: Bytes::from(frame),
        statements: (i % 100) as u32,
        source: format!("src-{}", i % 3),
        headers: if i.is_multiple_of(2) {
            vec![("seq".into(), i.to_string()), ("k".into(), "v".into())]
        } else {
            vec![]
        },
    }
}

/// Items of the same encoded size (for tests that compute file positions).
fn fixed_item(i: u64) -> NewItem {
    NewItem {
        frame: Bytes::from(format!("fixed-{i:08}")),
        statements: 1,
        source: "s".into(),
        headers: vec![],
    }
}

fn assert_item(got: &Item, offset: u64, want: &NewItem) {
    assert_eq!(got.offset, offset);
    assert_eq!(got.frame, want.frame, "frame of offset {offset}");
    assert_eq!(got.statements, want.statements);
    assert_eq!(got.source, want.source);
    assert_eq!(got.headers, want.headers);
}

async fn read_all(log: &FileLog) -> Vec<Item> {
    let mut out = Vec::new();
    let mut from = log.first_offset();
    loop {
        let page = log.read(from, ReadLimits::default()).await.unwrap();
        let Some(last) = page.last() else { break };
        from = last.offset + 1;
        out.extend(page);
    }
    out
}

/// Small segments and no tail cache, so reads go to the files.
fn small(segment_bytes: u64) -> FileLogOptions {
    FileLogOptions {
        segment_bytes,
        index_interval_bytes: 200,
        tail_cache_bytes: 0,
        ..FileLogOptions::default()
    }
}

fn open(dir: &Path, opts: FileLogOptions) -> FileLog {
    FileLog::open(dir, opts).unwrap()
}

fn seg_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "seg"))
        .collect();
    v.sort();
    v
}

fn seg_path(dir: &Path, base: u64) -> PathBuf {
    dir.join(format!("{base:020}.seg"))
}

#[tokio::test]
async fn round_trip_across_rollovers() {
    let dir = TempDir::new("rt");
    let log = open(dir.path(), small(2048));
    assert_eq!((log.first_offset(), log.next_offset()), (0, 0));
    let mut i = 0u64;
    while i < 300 {
        let n = 1 + i % 4;
        let batch: Vec<NewItem> = (i..i + n).map(item).collect();
        let offsets = log.append(batch).await.unwrap();
        assert_eq!(offsets, (i..i + n).collect::<Vec<_>>());
        i += n;
    }
    assert_eq!(log.next_offset(), i);
    assert!(log.segment_count() > 5, "{} segments", log.segment_count());
    assert_eq!(seg_files(dir.path()).len(), log.segment_count());
    let all = read_all(&log).await;
    assert_eq!(all.len() as u64, i);
    for (k, it) in all.iter().enumerate() {
        assert_item(it, k as u64, &item(k as u64));
    }
    // Every offset can be a starting point (sparse index, segment lookup).
    for k in 0..i {
        let one = log
            .read(
                k,
                ReadLimits {
                    max_items: 1,
                    max_bytes: usize::MAX,
                },
            )
            .await
            .unwrap();
        assert_eq!(one.len(), 1);
        assert_item(&one[0], k, &item(k));
    }
    assert!(log.read(i, ReadLimits::default()).await.unwrap().is_empty());
    assert!(
        log.read(i + 10, ReadLimits::default())
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(log.append(vec![]).await.unwrap(), Vec::<u64>::new());
    assert_eq!(log.next_offset(), i);
}

#[tokio::test]
async fn reopen_restores_offsets_and_contents() {
    let dir = TempDir::new("reopen");
    let log = open(dir.path(), small(1500));
    for i in 0..120 {
        log.append(vec![item(i)]).await.unwrap();
    }
    let before = read_all(&log).await;
    let segments = log.segment_count();
    drop(log);

    let log = open(dir.path(), small(1500));
    assert_eq!(log.first_offset(), 0);
    assert_eq!(log.next_offset(), 120);
    assert_eq!(*log.watch().borrow(), 120);
    assert_eq!(log.segment_count(), segments);
    assert_eq!(read_all(&log).await, before);
    assert_eq!(log.append(vec![item(120)]).await.unwrap(), vec![120]);
    drop(log);

    let log = open(dir.path(), small(1500));
    assert_eq!(log.next_offset(), 121);
    let all = read_all(&log).await;
    assert_eq!(all.len(), 121);
    assert_item(&all[120], 120, &item(120));
    // Timestamps survived too.
    assert_eq!(all[..120], before[..]);
}

/// Newest segments that go missing (removed by hand, lost) are noticed on open: the
/// log records where its newest segment started, so it does not quietly hand out
/// their offsets again.
#[tokio::test]
async fn missing_newest_segments_are_refused_not_reused() {
    let dir = TempDir::new("missing-newest");
    let log = open(dir.path(), small(1500));
    for i in 0..120 {
        log.append(vec![item(i)]).await.unwrap();
    }
    drop(log);
    let segs = seg_files(dir.path());
    assert!(segs.len() >= 3, "{segs:?}");
    let record = dir.path().join("newest-segment");
    // The newest one gone: refused, naming the record and what is missing.
    let newest = segs.last().unwrap().clone();
    let kept = fs::read(&newest).unwrap();
    fs::remove_file(&newest).unwrap();
    match FileLog::open(dir.path(), small(1500)) {
        Err(LogError::Corrupt { path, reason, .. }) => {
            assert_eq!(Path::new(&path), record, "{reason}");
            assert!(reason.contains("newest segments are missing"), "{reason}");
        }
        Err(e) => panic!("expected Corrupt, got {e}"),
        Ok(l) => panic!("opened at next offset {}", l.next_offset()),
    }
    // All of them gone: refused too.
    for p in &segs[..segs.len() - 1] {
        fs::rename(p, p.with_extension("away")).unwrap();
    }
    assert!(FileLog::open(dir.path(), small(1500)).is_err());
    // Put back, the log opens as it was.
    for p in &segs[..segs.len() - 1] {
        fs::rename(p.with_extension("away"), p).unwrap();
    }
    fs::write(&newest, kept).unwrap();
    let log = open(dir.path(), small(1500));
    assert_eq!(log.next_offset(), 120);
    // Retention of old segments does not trip it: only the newest start counts.
    drop(log);
    fs::remove_file(&segs[0]).unwrap();
    let log = open(dir.path(), small(1500));
    assert_eq!(log.next_offset(), 120);
}

/// A log that never rolled is on record from its creation: losing its only segment
/// is refused like losing the newest ones, not taken for a new log at offset 0.
#[tokio::test]
async fn a_lost_only_segment_is_refused_not_started_over() {
    let dir = TempDir::new("lost-only");
    let log = open(dir.path(), small(1 << 20));
    for i in 0..5 {
        log.append(vec![item(i)]).await.unwrap();
    }
    drop(log);
    assert_eq!(seg_files(dir.path()).len(), 1);
    fs::remove_file(seg_path(dir.path(), 0)).unwrap();
    match FileLog::open(dir.path(), small(1 << 20)) {
        Err(LogError::Corrupt { path, reason, .. }) => {
            assert_eq!(Path::new(&path), dir.path().join("newest-segment"));
            assert!(reason.contains("no segment is left"), "{reason}");
        }
        Err(e) => panic!("expected Corrupt, got {e}"),
        Ok(l) => panic!("opened at next offset {}", l.next_offset()),
    }
}

/// A log from before the record was kept from the start (one segment, no
/// `newest-segment`) opens as it was, and is on record from then on.
#[tokio::test]
async fn a_log_without_a_record_opens_and_gets_one() {
    let dir = TempDir::new("no-record");
    let log = open(dir.path(), small(1 << 20));
    for i in 0..5 {
        log.append(vec![item(i)]).await.unwrap();
    }
    drop(log);
    let record = dir.path().join("newest-segment");
    fs::remove_file(&record).unwrap();
    let log = open(dir.path(), small(1 << 20));
    assert_eq!((log.first_offset(), log.next_offset()), (0, 5));
    assert_eq!(read_all(&log).await.len(), 5);
    drop(log);
    // The newest segment's start, and the newest timestamp (of the items it holds).
    let text = fs::read_to_string(&record).unwrap();
    assert_eq!(text.lines().next(), Some("0"), "{text}");
    fs::remove_file(seg_path(dir.path(), 0)).unwrap();
    assert!(FileLog::open(dir.path(), small(1 << 20)).is_err());
}

#[tokio::test]
async fn read_limits_are_honoured() {
    let dir = TempDir::new("limits");
    let log = open(dir.path(), small(1024));
    let frame_len = fixed_item(0).frame.len();
    // One batch per item: a batch never straddles segments, and this test wants many.
    for i in 0..50 {
        log.append(vec![fixed_item(i)]).await.unwrap();
    }

    let page = |from, max_items, max_bytes| {
        let log = &log;
        async move {
            log.read(
                from,
                ReadLimits {
                    max_items,
                    max_bytes,
                },
            )
            .await
            .unwrap()
        }
    };
    let p = page(3, 7, usize::MAX).await;
    assert_eq!(
        p.iter().map(|i| i.offset).collect::<Vec<_>>(),
        (3..10).collect::<Vec<_>>()
    );
    // max_bytes counts frame bytes: room for exactly 4 frames.
    let p = page(10, 100, frame_len * 4 + frame_len / 2).await;
    assert_eq!(p.len(), 4);
    assert_eq!(p[0].offset, 10);
    let p = page(10, 100, frame_len * 4).await;
    assert_eq!(p.len(), 4);
    // At least one item, even if it is larger than max_bytes.
    let p = page(20, 100, 1).await;
    assert_eq!(p.len(), 1);
    assert_eq!(p[0].offset, 20);
    // max_items 0 reads nothing.
    assert!(page(20, 0, usize::MAX).await.is_empty());
    // A page spanning several segments stops at the end of the log.
    let p = page(30, 1000, usize::MAX).await;
    assert_eq!(p.len(), 20);
    assert!(log.segment_count() > 2);
    for (k, it) in p.iter().enumerate() {
        assert_item(it, 30 + k as u64, &fixed_item(30 + k as u64));
    }
}

/// Ways of damaging the tail of the last segment, as a crash could.
#[derive(Debug, Clone, Copy)]
enum Damage {
    /// Cut the last record in the middle of its body.
    CutBody,
    /// Cut the last record inside its 8-byte header.
    CutHeader,
    /// Flip a byte in the last record's body (CRC mismatch).
    FlipBody,
    /// Flip a bit of the last record's length field (length past the end).
    FlipLength,
    /// Zeros after the last record (pre-allocated, never written).
    TrailingZeros,
    /// Half of a valid record after the last one.
    PartialCopy,
    /// Pseudo-random bytes after the last record.
    TrailingGarbage,
    /// A flipped byte in the last record's body, and zeros after it.
    FlipBodyThenZeros,
    /// The last record cut in half, then a whole copy of the first record: its CRC
    /// checks, but its offset cannot follow (stale data, not a lost record).
    CutThenStaleCopy,
}

/// `n` bytes that look like nothing in particular (xorshift).
fn garbage(n: usize) -> Vec<u8> {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

#[tokio::test]
async fn torn_tail_is_truncated_and_appends_continue() {
    for damage in [
        Damage::CutBody,
        Damage::CutHeader,
        Damage::FlipBody,
        Damage::FlipLength,
        Damage::TrailingZeros,
        Damage::PartialCopy,
        Damage::TrailingGarbage,
        Damage::FlipBodyThenZeros,
        Damage::CutThenStaleCopy,
    ] {
        let dir = TempDir::new("torn");
        let log = open(dir.path(), small(1 << 20));
        let n = 10u64;
        log.append((0..n).map(fixed_item).collect()).await.unwrap();
        let before = read_all(&log).await;
        drop(log);

        let path = seg_path(dir.path(), 0);
        let mut bytes = fs::read(&path).unwrap();
        let rec = bytes.len() / n as usize;
        assert_eq!(
            bytes.len() % n as usize,
            0,
            "fixed items have equal records"
        );
        let last = bytes.len() - rec;
        // `intact` is how many records must survive.
        let intact = match damage {
            Damage::CutBody => {
                bytes.truncate(last + rec / 2);
                n - 1
            }
            Damage::CutHeader => {
                bytes.truncate(last + 5);
                n - 1
            }
            Damage::FlipBody => {
                bytes[last + 8 + 20] ^= 0x40;
                n - 1
            }
            Damage::FlipLength => {
                bytes[last + 2] ^= 0x01;
                n - 1
            }
            Damage::TrailingZeros => {
                bytes.extend(std::iter::repeat_n(0u8, 300));
                n
            }
            Damage::PartialCopy => {
                let copy = bytes[last..last + rec / 2].to_vec();
                bytes.extend(copy);
                n
            }
            Damage::TrailingGarbage => {
                bytes.extend(garbage(700));
                n
            }
            Damage::FlipBodyThenZeros => {
                bytes[last + 8 + 20] ^= 0x40;
                bytes.extend(std::iter::repeat_n(0u8, 4096));
                n - 1
            }
            Damage::CutThenStaleCopy => {
                let first = bytes[..rec].to_vec();
                bytes.truncate(last + rec / 2);
                bytes.extend(first);
                n - 1
            }
        };
        fs::write(&path, &bytes).unwrap();

        let log = open(dir.path(), small(1 << 20));
        assert_eq!(log.next_offset(), intact, "{damage:?}");
        let after = read_all(&log).await;
        assert_eq!(after[..], before[..intact as usize], "{damage:?}");
        assert_eq!(
            fs::metadata(&path).unwrap().len(),
            intact * rec as u64,
            "{damage:?}: the torn bytes are cut off"
        );
        assert_eq!(log.append(vec![item(99)]).await.unwrap(), vec![intact]);
        drop(log);
        let log = open(dir.path(), small(1 << 20));
        let after = read_all(&log).await;
        assert_eq!(after.len() as u64, intact + 1, "{damage:?}");
        assert_item(&after[intact as usize], intact, &item(99));
    }
}

#[tokio::test]
async fn torn_tail_of_fresh_segment_after_rollover() {
    // The last segment holds only a torn record: it becomes empty, and the log ends
    // where the previous segment ends.
    let dir = TempDir::new("torn-roll");
    let log = open(dir.path(), small(100));
    log.append(vec![fixed_item(0)]).await.unwrap();
    log.append(vec![fixed_item(1)]).await.unwrap();
    assert_eq!(log.segment_count(), 2);
    drop(log);
    let path = seg_path(dir.path(), 1);
    let len = fs::metadata(&path).unwrap().len();
    fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(len - 1)
        .unwrap();
    let log = open(dir.path(), small(100));
    assert_eq!(log.next_offset(), 1);
    assert_eq!(read_all(&log).await.len(), 1);
    assert_eq!(log.append(vec![fixed_item(7)]).await.unwrap(), vec![1]);
    assert_item(
        &log.read(1, ReadLimits::default()).await.unwrap()[0],
        1,
        &fixed_item(7),
    );
}

fn expect_corrupt(r: Result<FileLog, LogError>, path: &Path, offset: u64) {
    match r {
        Err(LogError::Corrupt {
            path: p,
            offset: o,
            reason,
        }) => {
            assert_eq!(Path::new(&p), path, "{reason}");
            assert_eq!(o, offset, "{reason}");
        }
        Err(e) => panic!("expected Corrupt, got {e}"),
        Ok(_) => panic!("expected Corrupt, the log opened"),
    }
}

/// Writes `n` fixed items into segments of 3 records each; returns the record size.
async fn three_segments(dir: &Path, n: u64) -> usize {
    let rec = 8 + 30 + 1 + fixed_item(0).frame.len();
    let log = open(dir, small(3 * rec as u64));
    for i in 0..n {
        log.append(vec![fixed_item(i)]).await.unwrap();
    }
    assert_eq!(log.segment_count() as u64, n.div_ceil(3));
    rec
}

#[tokio::test]
async fn corruption_in_an_older_segment_is_an_error() {
    let dir = TempDir::new("corrupt");
    let rec = three_segments(dir.path(), 9).await;
    let first = seg_path(dir.path(), 0);
    assert_eq!(fs::metadata(&first).unwrap().len(), 3 * rec as u64);
    let clean = fs::read(&first).unwrap();

    // A flipped byte in the second record of the first segment.
    let mut bytes = clean.clone();
    bytes[rec + 8 + 25] ^= 1;
    fs::write(&first, &bytes).unwrap();
    expect_corrupt(
        FileLog::open(dir.path(), small(1 << 20)),
        &first,
        rec as u64,
    );
    // Nothing was truncated.
    assert_eq!(fs::read(&first).unwrap(), bytes);

    // A truncated older segment (as if its tail had been lost).
    fs::write(&first, &clean[..clean.len() - 4]).unwrap();
    expect_corrupt(
        FileLog::open(dir.path(), small(1 << 20)),
        &first,
        2 * rec as u64,
    );

    // A missing segment in the middle.
    fs::write(&first, &clean).unwrap();
    assert!(FileLog::open(dir.path(), small(1 << 20)).is_ok());
    fs::remove_file(seg_path(dir.path(), 3)).unwrap();
    expect_corrupt(
        FileLog::open(dir.path(), small(1 << 20)),
        &seg_path(dir.path(), 6),
        0,
    );
}

/// Ways of damaging a record in the middle of the last segment, with intact records
/// after it: bit rot or a misdirected write, never a torn write.
#[derive(Debug, Clone, Copy)]
enum MidDamage {
    /// A flipped byte in the record's body (CRC mismatch).
    FlipBody,
    /// A flipped bit of the length: the length runs past the end of the file.
    FlipLengthHigh,
    /// A flipped low bit of the length: a CRC mismatch over a shifted body.
    FlipLengthLow,
    /// A flipped byte of the stored CRC.
    FlipCrc,
    /// Three records overwritten with zeros (a lost block).
    ZeroRecords,
    /// Three records overwritten with garbage.
    GarbageRecords,
}

#[tokio::test]
async fn damage_in_the_middle_of_the_last_segment_is_corrupt_not_torn() {
    for damage in [
        MidDamage::FlipBody,
        MidDamage::FlipLengthHigh,
        MidDamage::FlipLengthLow,
        MidDamage::FlipCrc,
        MidDamage::ZeroRecords,
        MidDamage::GarbageRecords,
    ] {
        let dir = TempDir::new("mid");
        let log = open(dir.path(), small(1 << 20));
        let n = 25u64;
        for i in 0..n {
            log.append(vec![fixed_item(i)]).await.unwrap();
        }
        drop(log);
        let path = seg_path(dir.path(), 0);
        let mut bytes = fs::read(&path).unwrap();
        let rec = bytes.len() / n as usize;
        assert_eq!(bytes.len() % n as usize, 0);
        // Record 7 goes bad; records 8.. (or 10.. when three go) are intact.
        let at = 7 * rec;
        let damaged = match damage {
            MidDamage::FlipBody => {
                bytes[at + 8 + 25] ^= 0x01;
                1
            }
            MidDamage::FlipLengthHigh => {
                bytes[at + 3] ^= 0x10;
                1
            }
            MidDamage::FlipLengthLow => {
                bytes[at] ^= 0x01;
                1
            }
            MidDamage::FlipCrc => {
                bytes[at + 5] ^= 0x80;
                1
            }
            MidDamage::ZeroRecords => {
                bytes[at..at + 3 * rec].fill(0);
                3
            }
            MidDamage::GarbageRecords => {
                bytes[at..at + 3 * rec].copy_from_slice(&garbage(3 * rec));
                3
            }
        };
        fs::write(&path, &bytes).unwrap();
        let follow = n - 7 - damaged;
        match FileLog::open(dir.path(), small(1 << 20)) {
            Err(LogError::Corrupt {
                path: p,
                offset,
                reason,
            }) => {
                assert_eq!(Path::new(&p), path, "{damage:?}");
                assert_eq!(offset, at as u64, "{damage:?}: {reason}");
                let want = format!(
                    "{follow} valid record(s) ({} bytes, offsets {} to {}) follow from byte {}",
                    follow * rec as u64,
                    7 + damaged,
                    n - 1,
                    (7 + damaged) * rec as u64
                );
                assert!(reason.contains(&want), "{damage:?}: {reason}");
            }
            Err(e) => panic!("{damage:?}: expected Corrupt, got {e}"),
            Ok(log) => panic!(
                "{damage:?}: the log opened with next offset {}",
                log.next_offset()
            ),
        }
        // Nothing was cut or changed: the operator still has every record.
        assert_eq!(fs::read(&path).unwrap(), bytes, "{damage:?}");
    }
}

/// Damage found at runtime cuts reads off at the damaged record, no earlier and (when
/// only its checksum failed) no later: a read that reaches it returns the items
/// before it, the read from it fails naming it, and a read from beyond it is served
/// (the damage is noted all the same). A damaged length leaves nothing to step over.
#[tokio::test]
async fn a_damaged_record_cuts_reads_off_at_itself() {
    use std::os::unix::fs::FileExt as _;
    // Flipped: a byte of the body, the high byte of the length (now past the end of
    // the segment), or its low byte (still within it, so the read steps to a place
    // that is no record: what it finds there fails its checksum).
    for (flip_length, low) in [(false, false), (true, false), (true, true)] {
        let dir = TempDir::new("cutoff");
        let log = open(dir.path(), small(1 << 20));
        let n = 40u64;
        for i in 0..n {
            log.append(vec![fixed_item(i)]).await.unwrap();
        }
        let path = seg_path(dir.path(), 0);
        let rec = fs::metadata(&path).unwrap().len() / n;
        // Record 21.
        let at = 21 * rec
            + if !flip_length {
                8 + 25
            } else if low {
                0
            } else {
                3
            };
        let f = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .unwrap();
        let mut b = [0u8; 1];
        f.read_exact_at(&mut b, at).unwrap();
        f.write_all_at(&[b[0] ^ 0x10], at).unwrap();
        drop(f);
        assert_eq!(log.damage(), None);

        let limits = ReadLimits {
            max_items: 100,
            ..ReadLimits::default()
        };
        let before = log.read(0, limits).await.unwrap();
        assert_eq!(before.len(), 21, "flip_length {flip_length}");
        for (i, it) in before.iter().enumerate() {
            assert_item(it, i as u64, &fixed_item(i as u64));
        }
        let e = log.read(21, limits).await.unwrap_err();
        assert!(matches!(e, LogError::Corrupt { .. }), "{e}");
        assert!(log.damage().is_some());
        let after = log.read(22, limits).await;
        if flip_length {
            let e = after.unwrap_err();
            assert!(matches!(e, LogError::Corrupt { .. }), "{e}");
        } else {
            let after = after.unwrap();
            assert_eq!(after.len(), 18);
            for (k, it) in after.iter().enumerate() {
                let i = 22 + k as u64;
                assert_item(it, i, &fixed_item(i));
            }
            assert_eq!(log.read(30, limits).await.unwrap().len(), 10);
        }
    }
}

/// Damage noted by a read from beyond it, which steps over it, is reported too.
#[tokio::test]
async fn a_damaged_record_stepped_over_is_noted() {
    use std::os::unix::fs::FileExt as _;
    let dir = TempDir::new("stepnote");
    let log = open(dir.path(), small(1 << 20));
    for i in 0..40 {
        log.append(vec![fixed_item(i)]).await.unwrap();
    }
    let path = seg_path(dir.path(), 0);
    let rec = fs::metadata(&path).unwrap().len() / 40;
    let f = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    f.write_all_at(b"\xff", 21 * rec + 8 + 25).unwrap();
    drop(f);
    let after = log.read(22, ReadLimits::default()).await.unwrap();
    assert_eq!(after.first().map(|i| i.offset), Some(22));
    let damage = log.damage().expect("the damage stepped over is noted");
    assert!(damage.contains("CRC"), "{damage}");
}

#[tokio::test]
async fn damage_in_the_last_segment_is_found_across_large_records() {
    // Items larger than the reader's 256 KiB window: the search must follow records
    // that do not fit in its buffer.
    let dir = TempDir::new("mid-big");
    let log = open(dir.path(), small(64 << 20));
    let big = |i: u64| NewItem {
        frame: Bytes::from(vec![i as u8; 300 << 10]),
        statements: 1,
        source: String::new(),
        headers: vec![],
    };
    for i in 0..4 {
        log.append(vec![big(i)]).await.unwrap();
    }
    drop(log);
    let path = seg_path(dir.path(), 0);
    let mut bytes = fs::read(&path).unwrap();
    let rec = bytes.len() / 4;
    bytes[rec + 1000] ^= 0x01;
    fs::write(&path, &bytes).unwrap();
    match FileLog::open(dir.path(), small(64 << 20)) {
        Err(LogError::Corrupt { offset, reason, .. }) => {
            assert_eq!(offset, rec as u64, "{reason}");
            assert!(reason.contains("2 valid record(s)"), "{reason}");
        }
        Err(e) => panic!("expected Corrupt, got {e}"),
        Ok(_) => panic!("the log opened"),
    }
    assert_eq!(fs::read(&path).unwrap(), bytes);
}

#[tokio::test]
async fn valid_record_with_wrong_offset_in_last_segment_is_corrupt_not_torn() {
    // A record with a good CRC is not a torn write; cutting it could drop acknowledged
    // data, so recovery refuses instead.
    let dir = TempDir::new("dup");
    let rec = three_segments(dir.path(), 8).await;
    let last = seg_path(dir.path(), 6);
    let mut bytes = fs::read(&last).unwrap();
    assert_eq!(bytes.len(), 2 * rec);
    let dup = bytes[..rec].to_vec();
    bytes.extend(dup);
    fs::write(&last, &bytes).unwrap();
    expect_corrupt(
        FileLog::open(dir.path(), small(1 << 20)),
        &last,
        2 * rec as u64,
    );
}

#[tokio::test]
async fn items_over_the_limit_are_refused_before_writing() {
    let dir = TempDir::new("big");
    let opts = FileLogOptions {
        max_item_bytes: 1000,
        ..FileLogOptions::default()
    };
    let log = open(dir.path(), opts.clone());
    log.append(vec![item(0)]).await.unwrap();
    let size = fs::metadata(seg_path(dir.path(), 0)).unwrap().len();
    let big = NewItem {
        frame: Bytes::from(vec![7u8; 1000]),
        ..item(1)
    };
    match log.append(vec![item(1), big.clone()]).await {
        Err(LogError::ItemTooLarge { size, max }) => {
            assert_eq!(max, 1000);
            assert!(size > 1000);
        }
        other => panic!("expected ItemTooLarge, got {other:?}"),
    }
    assert_eq!(log.next_offset(), 1);
    assert_eq!(fs::metadata(seg_path(dir.path(), 0)).unwrap().len(), size);
    // Too many headers is refused the same way.
    let many = NewItem {
        headers: vec![(String::new(), String::new()); 70_000],
        ..item(1)
    };
    let opts2 = FileLogOptions {
        max_item_bytes: 10 << 20,
        ..opts
    };
    drop(log);
    let log = open(dir.path(), opts2);
    assert!(matches!(
        log.append(vec![many]).await,
        Err(LogError::ItemTooLarge { .. })
    ));
    // Under the limit it goes in.
    let ok = NewItem {
        frame: Bytes::from(vec![7u8; 900]),
        ..item(1)
    };
    assert_eq!(log.append(vec![ok.clone()]).await.unwrap(), vec![1]);
    assert_item(
        &log.read(1, ReadLimits::default()).await.unwrap()[0],
        1,
        &ok,
    );
}

#[tokio::test]
async fn retention_by_size() {
    let dir = TempDir::new("ret-size");
    let rec = 8 + 30 + 1 + fixed_item(0).frame.len() as u64;
    let opts = FileLogOptions {
        retention_bytes: Some(10 * rec),
        ..small(4 * rec)
    };
    let log = open(dir.path(), opts.clone());
    for i in 0..100 {
        log.append(vec![fixed_item(i)]).await.unwrap();
        // Never more than the limit plus the active segment.
        assert!(
            log.size_bytes() <= 10 * rec + 4 * rec,
            "{}",
            log.size_bytes()
        );
    }
    let first = log.first_offset();
    assert!(
        first > 80 && first.is_multiple_of(4),
        "first retained offset {first}"
    );
    assert_eq!(log.next_offset(), 100);
    match log.read(first - 1, ReadLimits::default()).await {
        Err(LogError::Truncated {
            requested,
            first: f,
        }) => {
            assert_eq!((requested, f), (first - 1, first));
        }
        other => panic!("expected Truncated, got {other:?}"),
    }
    assert!(matches!(
        log.read(0, ReadLimits::default()).await,
        Err(LogError::Truncated { .. })
    ));
    let rest = read_all(&log).await;
    assert_eq!(rest.len() as u64, 100 - first);
    assert_item(&rest[0], first, &fixed_item(first));
    // Deleted from disk, not just hidden.
    let files = seg_files(dir.path());
    assert_eq!(files.len(), log.segment_count());
    assert_eq!(files[0], seg_path(dir.path(), first));
    drop(log);
    let log = open(dir.path(), opts);
    assert_eq!((log.first_offset(), log.next_offset()), (first, 100));
}

/// A clock the test sets: the time in ms it reads, and the clock for the log.
fn injected_clock(start_ms: u64) -> (Arc<AtomicU64>, Clock) {
    let now = Arc::new(AtomicU64::new(start_ms));
    let read = now.clone();
    (now, Clock::from_fn(move || read.load(Ordering::SeqCst)))
}

/// Appends `n` one-item batches (items 0 to n-1), the clock a second later after each.
async fn append_a_second_apart(log: &FileLog, now: &AtomicU64, n: u64) {
    for i in 0..n {
        log.append(vec![fixed_item(i)]).await.unwrap();
        now.fetch_add(1000, Ordering::SeqCst);
    }
}

/// Limits set on a live log apply at once, without waiting for an append or the
/// periodic check (whose interval here is far longer than the test).
#[tokio::test]
async fn retention_set_on_a_live_log_applies_at_once() {
    let dir = TempDir::new("ret-set");
    let (now, clock) = injected_clock(1_000_000);
    let rec = 8 + 30 + 1 + fixed_item(0).frame.len() as u64;
    let opts = FileLogOptions {
        retention_check_interval: Duration::from_secs(3600),
        clock,
        ..small(2 * rec)
    };
    let log = open(dir.path(), opts);
    append_a_second_apart(&log, &now, 10).await;
    assert_eq!((log.first_offset(), log.segment_count()), (0, 5));

    // By size: about three segments' worth stays.
    log.set_retention(Some(6 * rec), None);
    assert_eq!((log.first_offset(), log.segment_count()), (4, 3));
    assert!(!seg_path(dir.path(), 2).exists());

    // By age, the size limit lifted: now is 1_010_000, and the newest items of the
    // segments [4, 6) and [6, 8) are 5 s and 3 s old, past 2.5 s; the active one's
    // newest is 1 s old.
    log.set_retention(None, Some(Duration::from_millis(2500)));
    assert_eq!((log.first_offset(), log.segment_count()), (8, 1));

    // No limits: nothing more goes, and the log goes on.
    log.set_retention(None, None);
    for i in 10..14 {
        log.append(vec![fixed_item(i)]).await.unwrap();
    }
    assert_eq!((log.first_offset(), log.next_offset()), (8, 14));
    let offsets: Vec<u64> = read_all(&log).await.iter().map(|i| i.offset).collect();
    assert_eq!(offsets, (8..14).collect::<Vec<_>>());
}

#[tokio::test]
async fn retention_by_age_with_injected_clock() {
    let dir = TempDir::new("ret-age");
    let (now, clock) = injected_clock(1_000_000);
    let rec = 8 + 30 + 1 + fixed_item(0).frame.len() as u64;
    let opts = FileLogOptions {
        retention_age: Some(Duration::from_secs(60)),
        retention_check_interval: Duration::from_millis(20),
        clock,
        ..small(2 * rec)
    };
    let log = open(dir.path(), opts);
    append_a_second_apart(&log, &now, 10).await;
    // Items carry the injected time.
    let all = read_all(&log).await;
    assert_eq!(all[0].timestamp_ms, 1_000_000);
    assert_eq!(all[9].timestamp_ms, 1_009_000);
    assert_eq!(log.segment_count(), 5);
    assert_eq!(log.first_offset(), 0);

    // 60 s after item 3 (the newest of segment [2, 4)): segments [0,2) and [2,4) go,
    // on the next append.
    now.store(1_003_000 + 60_001, Ordering::SeqCst);
    log.append(vec![fixed_item(10)]).await.unwrap();
    assert_eq!(log.first_offset(), 4);
    assert!(!seg_path(dir.path(), 0).exists());
    assert!(!seg_path(dir.path(), 2).exists());
    assert!(seg_path(dir.path(), 4).exists());

    // Without appends, the periodic check deletes every segment whose items are all
    // too old, the active one included (a quiet topic): a new, empty active segment
    // takes its place at the next offset.
    now.store(1_000_000_000, Ordering::SeqCst);
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while log.first_offset() < 11 && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(log.segment_count(), 1);
    assert_eq!(log.first_offset(), 11);
    assert_eq!(log.next_offset(), 11);
    assert_eq!(seg_files(dir.path()), vec![seg_path(dir.path(), 11)]);
    assert!(read_all(&log).await.is_empty());
    // The log goes on from there, also after a restart.
    log.append(vec![fixed_item(11)]).await.unwrap();
    drop(log);
    let log = open(dir.path(), small(2 * rec));
    assert_eq!(log.first_offset(), 11);
    let rest = read_all(&log).await;
    assert_eq!(rest.len(), 1);
    assert_item(&rest[0], 11, &fixed_item(11));
}

/// Timestamps never go backwards across a restart, also when age retention deleted
/// every item before it and the clock is behind after it: the newest timestamp is
/// kept with the record of the newest segment (`newest-segment`), since no record is
/// left to tell it. Otherwise a reader resuming by time from the last item it saw
/// would skip the items appended after the restart.
#[tokio::test]
async fn timestamps_do_not_go_backwards_after_retention_emptied_the_log() {
    let dir = TempDir::new("ts-floor");
    let (now, clock) = injected_clock(5_000_000_000);
    let opts = FileLogOptions {
        retention_check_interval: Duration::from_secs(3600),
        clock,
        ..small(1 << 20)
    };
    let log = open(dir.path(), opts);
    append_a_second_apart(&log, &now, 2).await;
    let seen = read_all(&log).await[1].timestamp_ms;
    assert_eq!(seen, 5_000_001_000);
    // Both items expire: the active segment is closed and deleted.
    now.store(seen + 10_000, Ordering::SeqCst);
    log.set_retention(None, Some(Duration::from_secs(2)));
    assert_eq!((log.first_offset(), log.next_offset()), (2, 2));
    drop(log);

    // Restarted an hour behind, twice (the second start finds only the empty segment
    // the first one left, plus the record).
    for restart in 0..2 {
        let (_, behind) = injected_clock(seen - 3_600_000);
        let log = open(
            dir.path(),
            FileLogOptions {
                clock: behind,
                ..small(1 << 20)
            },
        );
        assert_eq!(log.next_offset(), 2);
        drop(log);
        assert!(
            fs::read_to_string(dir.path().join("newest-segment"))
                .unwrap()
                .contains(&seen.to_string()),
            "restart {restart}"
        );
    }
    let (_, behind) = injected_clock(seen - 3_600_000);
    let log = open(
        dir.path(),
        FileLogOptions {
            clock: behind,
            ..small(1 << 20)
        },
    );
    log.append(vec![fixed_item(2)]).await.unwrap();
    let all = read_all(&log).await;
    assert_eq!(all.len(), 1);
    assert_eq!(all[0].offset, 2);
    assert!(
        all[0].timestamp_ms >= seen,
        "offset 2 stamped {} before offset 1's {seen}",
        all[0].timestamp_ms
    );
    // A reader resuming from the time of the last item it saw gets the new one.
    assert_eq!(log.offset_for_timestamp(seen).await.unwrap(), 2);
}

/// A `newest-segment` written before timestamps were recorded (the offset alone)
/// still opens; the newest item on disk then gives the floor, and the record gains
/// the timestamp at the next roll.
#[tokio::test]
async fn a_record_without_a_timestamp_opens() {
    let dir = TempDir::new("ts-oldrecord");
    let (now, clock) = injected_clock(2_000_000);
    let opts = FileLogOptions {
        retention_check_interval: Duration::from_secs(3600),
        clock: clock.clone(),
        ..small(1 << 20)
    };
    let log = open(dir.path(), opts.clone());
    append_a_second_apart(&log, &now, 3).await;
    drop(log);
    let record = dir.path().join("newest-segment");
    fs::write(&record, "0\n").unwrap();
    // The clock behind: the items on disk hold the floor.
    now.store(1_000_000, Ordering::SeqCst);
    let log = open(dir.path(), opts.clone());
    log.append(vec![fixed_item(3)]).await.unwrap();
    assert_eq!(read_all(&log).await[3].timestamp_ms, 2_002_000);
    // Expired: rolled and deleted; the record now holds the newest timestamp.
    now.store(3_000_000, Ordering::SeqCst);
    log.set_retention(None, Some(Duration::from_secs(1)));
    assert_eq!((log.first_offset(), log.next_offset()), (4, 4));
    drop(log);
    assert_eq!(
        fs::read_to_string(&record).unwrap(),
        "4\nlast-timestamp-ms 2002000\n"
    );
    // Anything else in the record is refused, not half trusted.
    fs::write(&record, "4\nsomething else\n").unwrap();
    match FileLog::open(dir.path(), opts) {
        Err(LogError::Corrupt { path, reason, .. }) => {
            assert_eq!(Path::new(&path), record, "{reason}");
            assert!(reason.contains("something else"), "{reason}");
        }
        Err(e) => panic!("expected Corrupt, got {e}"),
        Ok(l) => panic!("opened at next offset {}", l.next_offset()),
    }
}

/// A quiet topic's items go at the pace of its age limit, not of the periodic
/// check's ceiling (an hour here, far past the test's deadline): retention is
/// checked every half of the limit. Also when the limit is set on a live log whose
/// writer is asleep for the ceiling (a PATCH of `retention_ms`).
#[tokio::test]
async fn age_retention_is_checked_at_the_pace_of_the_limit() {
    for set_live in [false, true] {
        let dir = TempDir::new("ret-pace");
        let (now, clock) = injected_clock(1_000_000);
        let opts = FileLogOptions {
            retention_age: (!set_live).then_some(Duration::from_millis(400)),
            retention_check_interval: Duration::from_secs(3600),
            clock,
            ..small(1 << 20)
        };
        let log = open(dir.path(), opts);
        log.append(vec![fixed_item(0)]).await.unwrap();
        if set_live {
            // After the append, the writer goes back to sleep for the ceiling (the
            // pause makes it likely that it has): setting the limit must wake it.
            tokio::time::sleep(Duration::from_millis(50)).await;
            log.set_retention(None, Some(Duration::from_millis(400)));
        }
        assert_eq!(log.first_offset(), 0);
        // Expired now; no append follows, so only the periodic check can see it.
        now.fetch_add(1_000, Ordering::SeqCst);
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while log.first_offset() == 0 && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(
            (log.first_offset(), log.next_offset()),
            (1, 1),
            "set on the live log: {set_live}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_appenders_get_dense_unique_offsets() {
    concurrent_appenders(Durability::Fsync).await;
}

/// The same with appends committed inline (no fsync: no writer thread on the path).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_inline_appenders_get_dense_unique_offsets() {
    concurrent_appenders(Durability::None).await;
    concurrent_appenders(Durability::Interval(Duration::from_millis(5))).await;
}

async fn concurrent_appenders(durability: Durability) {
    let dir = TempDir::new("concurrent");
    let opts = FileLogOptions {
        durability,
        ..small(8 << 10)
    };
    let log = Arc::new(open(dir.path(), opts));
    let mut tasks = Vec::new();
    for t in 0..8u64 {
        let log = log.clone();
        tasks.push(tokio::spawn(async move {
            let mut got = Vec::new();
            for k in 0..40u64 {
                let n = 1 + (t + k) % 3;
                let ids: Vec<u64> = (0..n).map(|j| t * 1_000_000 + k * 10 + j).collect();
                let offsets = log
                    .append(ids.iter().map(|&id| item(id)).collect())
                    .await
                    .unwrap();
                assert_eq!(offsets.len(), ids.len());
                // A batch gets consecutive offsets.
                for w in offsets.windows(2) {
                    assert_eq!(w[1], w[0] + 1);
                }
                got.extend(offsets.into_iter().zip(ids));
            }
            got
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    all.sort_unstable();
    let n = all.len() as u64;
    assert_eq!(
        all.iter().map(|(o, _)| *o).collect::<Vec<_>>(),
        (0..n).collect::<Vec<_>>(),
        "offsets are dense and unique"
    );
    assert_eq!(log.next_offset(), n);
    assert!(log.segment_count() > 1);
    let stored = read_all(&log).await;
    assert_eq!(stored.len() as u64, n);
    for (it, (offset, id)) in stored.iter().zip(&all) {
        assert_item(it, *offset, &item(*id));
    }
}

#[tokio::test]
async fn offset_for_timestamp_matches_a_linear_scan() {
    let dir = TempDir::new("ts");
    let (now, clock) = injected_clock(0);
    let opts = FileLogOptions {
        clock,
        ..small(600)
    };
    let log = open(dir.path(), opts);
    assert_eq!(log.offset_for_timestamp(5).await.unwrap(), 0);
    // Several items per timestamp, timestamps with gaps.
    let mut ts_of = Vec::new();
    for i in 0..90u64 {
        let ts = 1000 + (i / 3) * 10;
        now.store(ts, Ordering::SeqCst);
        log.append(vec![item(i)]).await.unwrap();
        ts_of.push(ts);
    }
    assert!(log.segment_count() > 3);
    for q in (990..=1310).step_by(5) {
        let want = ts_of.iter().position(|&t| t >= q).map_or(90, |p| p as u64);
        assert_eq!(log.offset_for_timestamp(q).await.unwrap(), want, "ts {q}");
    }
    // The clock going backwards does not make timestamps go backwards.
    now.store(500, Ordering::SeqCst);
    log.append(vec![item(90)]).await.unwrap();
    let last = log.read(90, ReadLimits::default()).await.unwrap();
    assert_eq!(last[0].timestamp_ms, *ts_of.last().unwrap());
    assert_eq!(log.offset_for_timestamp(600).await.unwrap(), 0);
}

#[tokio::test]
async fn watch_follows_appends() {
    let dir = TempDir::new("watch");
    let log = open(dir.path(), FileLogOptions::default());
    let mut rx = log.watch();
    assert_eq!(*rx.borrow_and_update(), 0);
    log.append(vec![item(0), item(1)]).await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), rx.changed())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(*rx.borrow_and_update(), 2);
    // Whatever the watch says is readable.
    assert_eq!(log.read(1, ReadLimits::default()).await.unwrap().len(), 1);
}

#[tokio::test]
async fn relaxed_durability_policies_round_trip() {
    for durability in [
        Durability::None,
        Durability::Interval(Duration::from_millis(5)),
    ] {
        let dir = TempDir::new("policy");
        let opts = FileLogOptions {
            durability,
            ..small(1000)
        };
        let log = open(dir.path(), opts.clone());
        for i in 0..50 {
            log.append(vec![item(i)]).await.unwrap();
        }
        assert_eq!(read_all(&log).await.len(), 50);
        drop(log);
        let log = open(dir.path(), opts);
        let all = read_all(&log).await;
        assert_eq!(all.len(), 50, "{durability}");
        assert_item(&all[49], 49, &item(49));
    }
}

#[test]
fn durability_parses_and_prints() {
    for (s, d) in [
        ("fsync", Durability::Fsync),
        ("none", Durability::None),
        (
            "interval:250",
            Durability::Interval(Duration::from_millis(250)),
        ),
    ] {
        assert_eq!(s.parse::<Durability>().unwrap(), d);
        assert_eq!(d.to_string(), s);
    }
    assert!("interval:".parse::<Durability>().is_err());
    assert!("sometimes".parse::<Durability>().is_err());
    assert_eq!(Durability::default(), Durability::Fsync);
}

#[tokio::test]
async fn unrelated_files_in_the_directory_are_ignored() {
    let dir = TempDir::new("other");
    fs::write(dir.path().join("notes.txt"), "hello").unwrap();
    fs::write(dir.path().join("12.seg.tmp"), "junk").unwrap();
    let log = open(dir.path(), FileLogOptions::default());
    assert_eq!(log.append(vec![item(0)]).await.unwrap(), vec![0]);
    drop(log);
    let log = open(dir.path(), FileLogOptions::default());
    assert_eq!(log.next_offset(), 1);
}

/// Reads served from the in-memory tail equal reads from the files, item for item and
/// page for page, and reads older than the cache fall back to the files.
#[tokio::test]
async fn tail_cache_serves_the_same_items_as_the_files() {
    let dir = TempDir::new("tail");
    let n = 300u64;
    let frames: usize = (0..n).map(|i| item(i).frame.len()).sum();
    // The cache holds about the newest third.
    let cached = FileLogOptions {
        tail_cache_bytes: frames / 3,
        ..small(4096)
    };
    let log = open(dir.path(), cached);
    for chunk in (0..n).collect::<Vec<_>>().chunks(7) {
        log.append(chunk.iter().map(|&i| item(i)).collect())
            .await
            .unwrap();
    }
    let limits = [
        ReadLimits::default(),
        ReadLimits {
            max_items: 5,
            max_bytes: usize::MAX,
        },
        ReadLimits {
            max_items: 1000,
            max_bytes: 300,
        },
    ];
    let mut from_cache = Vec::new();
    for &l in &limits {
        for from in [0, n / 3, 2 * n / 3, n - 1, n - 20] {
            from_cache.push(log.read(from, l).await.unwrap());
        }
    }
    let all = read_all(&log).await;
    assert_eq!(all.len(), n as usize);
    for (i, it) in all.iter().enumerate() {
        assert_item(it, i as u64, &item(i as u64));
    }
    drop(log);
    // Reopened with no cache: every read goes to the files.
    let log = open(dir.path(), small(4096));
    let mut k = 0;
    for &l in &limits {
        for from in [0, n / 3, 2 * n / 3, n - 1, n - 20] {
            let disk = log.read(from, l).await.unwrap();
            assert_eq!(disk, from_cache[k], "from {from}, limits {l:?}");
            assert!(!disk.is_empty());
            k += 1;
        }
    }
}

// ---------------------------------------------------------------------------------
// append_at: items that carry their own offsets and timestamps (mirrors)

/// Item `i` as a mirror would receive it: offset `i`, timestamp `1000 + i`.
fn placed(i: u64) -> Item {
    let it = item(i);
    Item {
        offset: i,
        timestamp_ms: 1_000 + i,
        frame: it.frame,
        statements: it.statements,
        source: it.source,
        headers: it.headers,
    }
}

fn placed_range(r: std::ops::Range<u64>) -> Vec<Item> {
    r.map(placed).collect()
}

#[tokio::test]
async fn append_at_keeps_offsets_and_timestamps_and_starts_an_empty_log_late() {
    let dir = TempDir::new("at-start");
    {
        let log = open(dir.path(), small(600));
        // An empty log starts wherever the first placed item is.
        log.append_at(placed_range(100..110), false).await.unwrap();
        log.append_at(placed_range(110..140), false).await.unwrap();
        assert_eq!(log.first_offset(), 100);
        assert_eq!(log.next_offset(), 140);
        assert_eq!(read_all(&log).await, placed_range(100..140));
        assert_eq!(log.offset_for_timestamp(1_120).await.unwrap(), 120);
        assert!(matches!(
            log.read(99, ReadLimits::default()).await,
            Err(LogError::Truncated {
                requested: 99,
                first: 100
            })
        ));
    }
    assert_eq!(seg_files(dir.path())[0], seg_path(dir.path(), 100));
    let log = open(dir.path(), small(600));
    assert_eq!(
        (log.first_offset(), log.next_offset()),
        (100, 140),
        "reopened"
    );
    assert_eq!(read_all(&log).await, placed_range(100..140));
    // Ordinary appends continue after the placed items, never earlier in time.
    assert_eq!(log.append(vec![item(140)]).await.unwrap(), vec![140]);
    let last = log.read(140, ReadLimits::default()).await.unwrap();
    assert!(last[0].timestamp_ms >= 1_139);
}

#[tokio::test]
async fn append_at_refuses_offsets_that_do_not_continue_the_log() {
    let dir = TempDir::new("at-refuse");
    let log = open(dir.path(), small(1 << 20));
    log.append_at(placed_range(0..5), false).await.unwrap();
    for (batch, expected, got) in [
        (placed_range(4..6), 5, 4),         // a duplicate
        (placed_range(7..9), 5, 7),         // a gap in a non-empty log
        (vec![placed(5), placed(7)], 6, 7), // a gap inside the batch
    ] {
        match log.append_at(batch, false).await {
            Err(LogError::OffsetMismatch {
                expected: e,
                got: g,
            }) => assert_eq!((e, g), (expected, got)),
            other => panic!("expected an offset mismatch, got {other:?}"),
        }
    }
    assert_eq!(log.next_offset(), 5, "nothing of the refused batches");
    log.append_at(placed_range(5..8), false).await.unwrap();
    assert_eq!(read_all(&log).await, placed_range(0..8));
}

#[tokio::test]
async fn append_at_with_restart_drops_the_old_items() {
    let dir = TempDir::new("at-restart");
    {
        let log = open(dir.path(), small(600));
        for start in (0..60).step_by(10) {
            log.append_at(placed_range(start..start + 10), false)
                .await
                .unwrap();
        }
        assert!(seg_files(dir.path()).len() > 2);
        let mut w = log.watch();
        log.append_at(placed_range(500..510), true).await.unwrap();
        assert_eq!(*w.borrow_and_update(), 510);
        assert_eq!((log.first_offset(), log.next_offset()), (500, 510));
        assert_eq!(read_all(&log).await, placed_range(500..510));
        assert!(matches!(
            log.read(59, ReadLimits::default()).await,
            Err(LogError::Truncated { first: 500, .. })
        ));
    }
    assert_eq!(seg_files(dir.path()), vec![seg_path(dir.path(), 500)]);
    let log = open(dir.path(), small(600));
    assert_eq!(read_all(&log).await, placed_range(500..510));
}

#[tokio::test]
async fn memory_log_append_at_follows_the_same_rules() {
    use jelly_server::log::MemoryLog;
    let log = MemoryLog::new(100);
    log.append_at(placed_range(10..20), false).await.unwrap();
    assert_eq!((log.first_offset(), log.next_offset()), (10, 20));
    assert!(matches!(
        log.append_at(placed_range(25..26), false).await,
        Err(LogError::OffsetMismatch {
            expected: 20,
            got: 25
        })
    ));
    log.append_at(placed_range(25..30), true).await.unwrap();
    let all = log.read(25, ReadLimits::default()).await.unwrap();
    assert_eq!(all, placed_range(25..30));
    assert_eq!(log.first_offset(), 25);
}

/// A slow topic under age retention: the active segment is closed once its first item
/// is older than the limit, so old items go although the segment never filled up.
#[tokio::test]
async fn age_retention_on_a_slow_topic_rolls_the_active_segment() {
    let dir = TempDir::new("ret-slow");
    let (now, clock) = injected_clock(1_000_000);
    let opts = FileLogOptions {
        retention_age: Some(Duration::from_secs(60)),
        retention_check_interval: Duration::from_secs(3600),
        clock,
        // Segments far larger than these items: only age can close one.
        ..small(64 << 20)
    };
    let log = open(dir.path(), opts);
    log.append(vec![fixed_item(0)]).await.unwrap();
    now.fetch_add(30_000, Ordering::SeqCst);
    log.append(vec![fixed_item(1)]).await.unwrap();
    assert_eq!(log.segment_count(), 1);
    // 61 s after item 0: item 2 starts a new segment.
    now.fetch_add(31_000, Ordering::SeqCst);
    log.append(vec![fixed_item(2)]).await.unwrap();
    assert_eq!(log.segment_count(), 2);
    assert_eq!(log.first_offset(), 0);
    assert_eq!(seg_files(dir.path())[1], seg_path(dir.path(), 2));
    // Once item 1 (the old segment's newest) is past the limit, the next append's
    // retention deletes that segment; items 2 and 3 stay.
    now.fetch_add(30_000, Ordering::SeqCst);
    log.append(vec![fixed_item(3)]).await.unwrap();
    assert_eq!(log.first_offset(), 2);
    let rest = read_all(&log).await;
    assert_eq!(rest.len(), 2);
    assert_item(&rest[0], 2, &fixed_item(2));
    assert_item(&rest[1], 3, &fixed_item(3));
}

/// Offsets never wrap around: a log whose next offset is `u64::MAX` refuses appends
/// (and a mirror's items that would pass it), keeps what it holds, and reopens.
#[tokio::test]
async fn offsets_past_the_largest_are_refused_not_wrapped() {
    let dir = TempDir::new("no-wrap");
    let max = u64::MAX;
    let at = |offset: u64| Item {
        offset,
        ..placed(0)
    };
    let log = open(dir.path(), small(1 << 20));
    // An empty log refuses to start where its items would pass the largest offset.
    let r = log.append_at(vec![at(max - 1), at(max)], false).await;
    assert!(
        matches!(r, Err(LogError::OffsetsExhausted { first, count: 2 }) if first == max - 1),
        "{r:?}"
    );
    assert_eq!(log.next_offset(), 0);
    log.append_at(vec![at(max - 2)], false).await.unwrap();
    log.append(vec![item(1)]).await.unwrap();
    assert_eq!(log.next_offset(), max);
    let r = log.append(vec![item(2)]).await;
    assert!(
        matches!(r, Err(LogError::OffsetsExhausted { first, count: 1 }) if first == max),
        "{r:?}"
    );
    let r = log.append_at(vec![at(max)], false).await;
    assert!(matches!(r, Err(LogError::OffsetsExhausted { .. })), "{r:?}");
    // Refused on its own: the log is not failed, and holds what it held.
    assert_eq!(log.failure(), None);
    drop(log);
    let log = open(dir.path(), small(1 << 20));
    assert_eq!((log.first_offset(), log.next_offset()), (max - 2, max));
    assert_eq!(read_all(&log).await.len(), 2);
    let r = log.append(vec![item(3)]).await;
    assert!(matches!(r, Err(LogError::OffsetsExhausted { .. })), "{r:?}");
    // The memory log keeps the same rule.
    let mem = jelly_server::log::MemoryLog::new(10);
    mem.append_at(vec![at(max - 1)], false).await.unwrap();
    assert!(matches!(
        mem.append(vec![item(0)]).await,
        Err(LogError::OffsetsExhausted { .. })
    ));
}

/// A segment named at the largest offset, or past it, cannot be one of the log's:
/// the log is refused naming the file (not skipped, nor wrapped around).
#[tokio::test]
async fn segment_names_that_leave_no_room_are_corrupt() {
    for name in [
        format!("{:020}.seg", u64::MAX),
        "99999999999999999999.seg".to_string(),
    ] {
        let dir = TempDir::new("no-room");
        drop(open(dir.path(), small(1 << 20)));
        let bad = dir.path().join(&name);
        fs::write(&bad, b"").unwrap();
        expect_corrupt(FileLog::open(dir.path(), small(1 << 20)), &bad, 0);
    }
}

/// A size limit far below `segment_bytes` (here the default 64 MiB) still holds:
/// segments roll at an eighth of the limit (not under 64 KiB), so retention, which
/// deletes whole segments, keeps the log near its limit rather than at a whole
/// 64 MiB segment.
#[tokio::test]
async fn retention_by_size_below_the_segment_size_holds() {
    let dir = TempDir::new("ret-small");
    let limit = 400_000u64;
    let opts = FileLogOptions {
        retention_bytes: Some(limit),
        durability: Durability::None,
        ..FileLogOptions::default()
    };
    let log = open(dir.path(), opts);
    let item = |i: u64| NewItem {
        frame: Bytes::from(vec![(i % 251) as u8; 10_000]),
        ..fixed_item(i)
    };
    for i in 0..200 {
        log.append(vec![item(i)]).await.unwrap();
        // The limit plus the active segment at most (which rolls at 64 KiB here).
        assert!(
            log.size_bytes() <= limit + (64 << 10) + 10_100,
            "after item {i}: {}",
            log.size_bytes()
        );
    }
    assert!(log.size_bytes() > limit / 2, "{}", log.size_bytes());
    let first = log.first_offset();
    assert!(first > 100, "first retained offset {first}");
    let rest = read_all(&log).await;
    assert_eq!(rest.len() as u64, 200 - first);
    assert_item(&rest[0], first, &item(first));
}
