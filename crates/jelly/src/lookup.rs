//! Encoder-side lookup tables: least-recently-used id assignment in flat arrays.

/// Result of looking a value up in an [`LruTable`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lookup {
    /// Already in the table under this id.
    Hit(u32),
    /// Newly assigned this id; the caller must emit an entry row. `wire_id` is the
    /// value to write in the entry's `id` field (0 when it follows the previous entry).
    New { id: u32, wire_id: u32 },
}

/// Per-id state of an [`LruTable`] and its value, kept together so that a check of an
/// id's generation and value, and then a hit, take one bounds check and one cache line.
#[derive(Debug, Clone, Default)]
struct Slot {
    /// Upper half of the value's hash, to skip most key comparisons while probing and
    /// to find the value's home slot when it is removed.
    hash: u32,
    /// Bumped each time the id is (re)assigned, so caches can tell a stale id.
    generation: u32,
    /// Statement stamp of the last use of the id, so an eviction never removes an
    /// entry the statement being encoded refers to.
    stamp: u32,
    /// Set on every use; cleared when the clock hand passes.
    referenced: bool,
    /// The value; its buffer is reused when the id is given to another value.
    key: String,
}

/// A lookup table of at most `max` entries with ids 1..=max. When full, a new value
/// takes the id of an entry not used recently, chosen by the clock (second-chance)
/// approximation of LRU: a hit only sets a flag, so the hot path does one store
/// instead of relinking a list.
///
/// Values are found through an open-addressing index (linear probing, load at most
/// 1/2) of ids; each id's value lives in a string buffer of its own that is reused
/// when the id is given to another value, so a warm table does not allocate.
#[derive(Debug)]
pub(crate) struct LruTable {
    /// Id per slot, 0 for an empty slot. Its length is a power of two.
    index: Vec<u32>,
    /// Per id (index 0 unused).
    slots: Vec<Slot>,
    seed: u64,
    /// Next eviction candidate.
    hand: u32,
    len: u32,
    max: u32,
    last_emitted: u32,
}

impl LruTable {
    pub fn new(max: u32) -> Self {
        use std::hash::BuildHasher;
        let seed = std::collections::hash_map::RandomState::new().hash_one(0x0074_6162_6c65_u64);
        // Ids are handed out in order before any is reused, so the per-id vectors and
        // the index grow with the table rather than being sized for `max` up front
        // (an encoder per small item stays cheap).
        LruTable {
            index: vec![0; 16],
            slots: vec![Slot::default()],
            seed,
            hand: 1,
            len: 0,
            max,
            last_emitted: 0,
        }
    }

    /// Finds an id to reuse, skipping ids used by the current statement.
    fn victim(&mut self, stamp: u32) -> Option<u32> {
        // Two sweeps clear every flag once, so an unprotected entry is found if one exists.
        for _ in 0..2 * self.max as usize + 1 {
            let id = self.hand;
            self.hand = if self.hand >= self.max {
                1
            } else {
                self.hand + 1
            };
            // A size-0 table (no prefixes) has no id to give: `None`, not a panic.
            let m = self.slots.get_mut(id as usize)?;
            if m.stamp == stamp {
                continue;
            }
            if m.referenced {
                m.referenced = false;
                continue;
            }
            return Some(id);
        }
        None
    }

    #[inline(always)]
    fn home(&self, tag: u32) -> usize {
        tag as usize & (self.index.len() - 1)
    }

    /// The id holding `value` (whose hash tag is `tag`), or the empty slot ending its probe.
    #[inline(always)]
    fn find(&self, value: &str, tag: u32) -> Result<u32, usize> {
        let mask = self.index.len() - 1;
        let mut i = self.home(tag);
        loop {
            let id = self.index[i];
            if id == 0 {
                return Err(i);
            }
            let s = &self.slots[id as usize];
            if s.hash == tag && bytes_eq(s.key.as_bytes(), value.as_bytes()) {
                return Ok(id);
            }
            i = (i + 1) & mask;
        }
    }

    /// Takes `id` out of the index, shifting later entries of its probe run back so
    /// that every entry stays reachable from its home slot.
    #[inline]
    fn unlink(&mut self, id: u32) {
        let mask = self.index.len() - 1;
        let mut hole = self.home(self.slots[id as usize].hash);
        while self.index[hole] != id {
            if self.index[hole] == 0 {
                // Not indexed (cannot happen for an assigned id).
                return;
            }
            hole = (hole + 1) & mask;
        }
        let mut k = (hole + 1) & mask;
        loop {
            let other = self.index[k];
            if other == 0 {
                break;
            }
            let home = self.home(self.slots[other as usize].hash);
            // `other` may fill the hole if the hole lies on its probe path (from its home to k).
            if (k.wrapping_sub(home) & mask) >= (k.wrapping_sub(hole) & mask) {
                self.index[hole] = other;
                hole = k;
            }
            k = (k + 1) & mask;
        }
        self.index[hole] = 0;
    }

    /// Doubles the index and re-places every indexed id (all but the newest, `len`)
    /// from its stored hash.
    #[cold]
    fn grow_index(&mut self) {
        self.index = vec![0; self.index.len() * 2];
        let mask = self.index.len() - 1;
        for id in 1..self.len as usize {
            let mut i = self.home(self.slots[id].hash);
            while self.index[i] != 0 {
                i = (i + 1) & mask;
            }
            // Ids are below 2^32: they come from a u32 counter.
            self.index[i] = id as u32;
        }
    }

    /// Looks `value` up, assigning an id (and evicting) on a miss.
    /// Returns `None` when every entry is in use by the current statement.
    #[inline]
    pub fn get_or_insert(&mut self, value: &str, stamp: u32) -> Option<Lookup> {
        let tag = (hash_bytes(value.as_bytes(), self.seed) >> 32) as u32;
        let mut slot = match self.find(value, tag) {
            Ok(id) => {
                self.touch(id, stamp);
                return Some(Lookup::Hit(id));
            }
            Err(slot) => slot,
        };
        let id = if self.len < self.max {
            self.len += 1;
            // After a `clear`, the buffers of earlier ids are still there for reuse.
            if self.slots.len() <= self.len as usize {
                self.slots.push(Slot::default());
            }
            if self.len as usize * 2 > self.index.len() {
                self.grow_index();
                slot = match self.find(value, tag) {
                    Err(slot) => slot,
                    Ok(_) => return None,
                };
            }
            self.len
        } else {
            let victim = self.victim(stamp)?;
            self.unlink(victim);
            // The removal may have moved entries into the probe run of `value`.
            slot = match self.find(value, tag) {
                Err(slot) => slot,
                Ok(_) => return None,
            };
            victim
        };
        self.index[slot] = id;
        let m = &mut self.slots[id as usize];
        m.hash = tag;
        m.generation = m.generation.wrapping_add(1);
        m.referenced = false;
        m.stamp = stamp;
        let key = &mut m.key;
        if key.capacity() < value.len() {
            // A fresh buffer with room to spare, rather than growing the old one (which
            // would copy its stale text): later values of similar length then fit.
            *key = String::with_capacity(value.len().next_power_of_two().max(32));
        }
        key.clear();
        key.push_str(value);
        let wire_id = if id == self.last_emitted.wrapping_add(1) {
            0
        } else {
            id
        };
        self.last_emitted = id;
        Some(Lookup::New { id, wire_id })
    }

    /// Empties the table as for a new stream, keeping its buffers (so an encoder reused
    /// for many small streams does not allocate again). Every id's generation moves
    /// on, so ids cached elsewhere before the reset no longer match.
    pub fn clear(&mut self) {
        self.index.fill(0);
        for m in &mut self.slots {
            m.generation = m.generation.wrapping_add(1);
            m.referenced = false;
        }
        self.hand = 1;
        self.len = 0;
        self.last_emitted = 0;
    }

    /// Makes the next new entry carry its id explicitly, whatever came before.
    pub fn forget_last_emitted(&mut self) {
        // No id is u32::MAX, so `last_emitted + 1` matches none.
        self.last_emitted = u32::MAX - 1;
    }

    /// Number of ids (the table's maximum size).
    pub fn size(&self) -> u32 {
        self.max
    }

    /// Generation of `id`: changes whenever the id is given to another value.
    #[inline]
    pub fn generation(&self, id: u32) -> u32 {
        self.slots[id as usize].generation
    }

    /// Marks `id` as just used.
    #[inline]
    pub fn touch(&mut self, id: u32, stamp: u32) {
        let m = &mut self.slots[id as usize];
        m.referenced = true;
        m.stamp = stamp;
    }

    /// The value stored under `id`.
    #[cfg(test)]
    pub fn value(&self, id: u32) -> &str {
        self.slots.get(id as usize).map_or("", |s| &s.key)
    }

    /// The generation of `id` and the value stored under it.
    #[inline(always)]
    pub fn entry(&self, id: u32) -> Option<(u32, &str)> {
        self.slots
            .get(id as usize)
            .map(|s| (s.generation, s.key.as_str()))
    }
}

/// Ids an IRI was last encoded with, and the generations of those table slots.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct CachedIds {
    pub pid: u32,
    pub pgen: u32,
    pub nid: u32,
    pub ngen: u32,
}

/// The little-endian words of a 16-byte block.
#[inline(always)]
fn words(w: &[u8; 16]) -> (u64, u64) {
    let v = u128::from_le_bytes(*w);
    (v as u64, (v >> 64) as u64)
}

/// The first and the last 8 bytes of `b` (at least 8 long; they overlap when shorter
/// than 16), as little-endian words.
#[inline(always)]
fn ends8(b: &[u8]) -> (u64, u64) {
    match (b.first_chunk::<8>(), b.last_chunk::<8>()) {
        (Some(x), Some(y)) => (u64::from_le_bytes(*x), u64::from_le_bytes(*y)),
        _ => (0, 0),
    }
}

/// The first and the last 4 bytes of `b` (at least 4 long), as little-endian words.
#[inline(always)]
fn ends4(b: &[u8]) -> (u64, u64) {
    match (b.first_chunk::<4>(), b.last_chunk::<4>()) {
        (Some(x), Some(y)) => (
            u64::from(u32::from_le_bytes(*x)),
            u64::from(u32::from_le_bytes(*y)),
        ),
        _ => (0, 0),
    }
}

/// Byte-string equality for the short strings of IRIs, inlined rather than a call to
/// `memcmp`: 16 bytes per step, the last step overlapping.
#[inline(always)]
pub(crate) fn bytes_eq(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    if n >= 16 {
        if n > 64 {
            // The library's vectorised comparison is cheaper from here on.
            return a == b;
        }
        // Whole blocks, then the last 16 bytes (overlapping the blocks when `n` is
        // not a multiple of 16, repeating the last one when it is).
        let (xs, _) = a.as_chunks::<16>();
        let (ys, _) = b.as_chunks::<16>();
        for (x, y) in xs.iter().zip(ys) {
            if u128::from_ne_bytes(*x) != u128::from_ne_bytes(*y) {
                return false;
            }
        }
        a.last_chunk::<16>().map(|x| u128::from_ne_bytes(*x))
            == b.last_chunk::<16>().map(|y| u128::from_ne_bytes(*y))
    } else if n >= 8 {
        ends8(a) == ends8(b)
    } else if n >= 4 {
        ends4(a) == ends4(b)
    } else {
        a == b
    }
}

/// The odd constant mixed into the hashes.
const HASH_K: u64 = 0x243f_6a88_85a3_08d3;

/// One step of the hashes: a 64×64→128-bit multiply whose halves are folded together.
#[inline(always)]
fn fold(a: u64, b: u64) -> u64 {
    let m = u128::from(a) * u128::from(b);
    (m as u64) ^ ((m >> 64) as u64)
}

/// Hashes `b` with a per-cache `seed`: 16 bytes per step, each step one 64×64→128-bit
/// multiply whose halves are folded together. Not cryptographic; the random seed keeps
/// colliding inputs from being precomputed.
#[inline(always)]
pub(crate) fn hash_bytes(b: &[u8], seed: u64) -> u64 {
    const K: u64 = HASH_K;
    let len = b.len();
    let mut h = seed ^ (len as u64).wrapping_mul(K);
    let (x, y) = if len >= 16 {
        // Every whole block but the last 16 bytes, which are taken last (overlapping
        // the previous block when len is not a multiple of 16).
        let (blocks, _) = b.as_chunks::<16>();
        for w in blocks.iter().take((len - 1) / 16) {
            let (lo, hi) = words(w);
            h = fold(lo ^ h, hi ^ K);
        }
        b.last_chunk::<16>().map_or((0, 0), words)
    } else if len >= 8 {
        ends8(b)
    } else if len >= 4 {
        ends4(b)
    } else if len > 0 {
        (
            u64::from(b[0]) | u64::from(b[len / 2]) << 8,
            u64::from(b[len - 1]),
        )
    } else {
        (0, 0)
    };
    fold(x ^ h, y ^ seed ^ K)
}

/// One way of an [`IriCache`] bucket: a hash tag and the ids, 20 bytes.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct IriWay {
    /// Upper half of the IRI's hash with the low bit set; 0 marks an empty way.
    pub tag: u32,
    pub ids: CachedIds,
}

/// Three ways and a round-robin victim counter: one 64-byte cache line.
#[derive(Debug, Clone, Copy, Default)]
#[repr(align(64))]
struct IriBucket {
    ways: [IriWay; 3],
    next: u32,
}

/// Full IRI → ids, a lossy set-associative cache: each IRI hashes to one bucket of
/// three ways, and a new IRI takes the place of a stale or older one. It keeps no
/// keys: a candidate's ids point at the prefix and name entries it was made from, and
/// it is the IRI only if those entries still hold their values (generations) and spell
/// the IRI. An IRI missing from the cache is found by a split and two table lookups,
/// with the same result, so the cache size never changes the bytes written.
///
/// It starts small and doubles (keeping its entries) as IRIs are inserted, up to the
/// size asked for.
#[derive(Debug)]
pub(crate) struct IriCache {
    buckets: Vec<IriBucket>,
    /// Largest number of buckets.
    max_buckets: usize,
    /// Insertions since the last doubling.
    inserts: usize,
    seed: u64,
}

impl IriCache {
    /// A cache that grows up to at least `capacity` ways.
    pub fn new(capacity: usize) -> Self {
        use std::hash::BuildHasher;
        let seed = std::collections::hash_map::RandomState::new().hash_one(0x006a_656c_6c79_u64);
        let max_buckets = capacity.div_ceil(3).next_power_of_two();
        IriCache {
            buckets: vec![IriBucket::default(); max_buckets.min(64)],
            max_buckets,
            inserts: 0,
            seed,
        }
    }

    /// The hash of an IRI for this cache: of its length and of at most 48 of its
    /// bytes (the first 16, 16 from the middle and the last 16), so that a lookup costs
    /// the same whatever the IRI's length. IRIs that differ only elsewhere share a
    /// bucket: the cache is lossy and checks every candidate against the tables, so
    /// such IRIs cost lookups in the tables, never a wrong id.
    #[inline(always)]
    pub fn hash(&self, key: &str) -> u64 {
        let b = key.as_bytes();
        if b.len() <= 48 {
            return hash_bytes(b, self.seed);
        }
        let (len, seed) = (b.len(), self.seed);
        let block = |at: usize| {
            b.get(at..)
                .and_then(<[u8]>::first_chunk::<16>)
                .map_or((0, 0), words)
        };
        let (h0, h1) = block(0);
        let (m0, m1) = block(len / 2 - 8);
        let (t0, t1) = block(len - 16);
        let h = seed ^ (len as u64).wrapping_mul(HASH_K);
        let h = fold(h0 ^ h, h1 ^ HASH_K);
        let h = fold(m0 ^ h, m1 ^ HASH_K);
        fold(t0 ^ h, t1 ^ seed ^ HASH_K)
    }

    /// The tag of a hash: its upper half with the low bit set. The bucket comes from
    /// the tag's other bits, so entries can be re-placed when the cache grows.
    #[inline(always)]
    fn tag_of(hash: u64) -> u32 {
        ((hash >> 32) as u32) | 1
    }

    #[inline(always)]
    fn bucket_of(tag: u32, buckets: usize) -> usize {
        (tag >> 1) as usize & (buckets - 1)
    }

    /// The ways of `hash`'s bucket, and the tag to look for in them.
    #[inline(always)]
    pub fn ways(&self, hash: u64) -> (&[IriWay; 3], u32) {
        let tag = Self::tag_of(hash);
        (
            &self.buckets[Self::bucket_of(tag, self.buckets.len())].ways,
            tag,
        )
    }

    /// Records `ids` for the IRI of `hash`, in a way of the same tag (a stale copy), an
    /// empty one, or else the bucket's next victim.
    #[inline]
    pub fn insert(&mut self, hash: u64, ids: CachedIds) {
        self.inserts += 1;
        if self.inserts > 2 * self.buckets.len() && self.buckets.len() < self.max_buckets {
            self.grow();
        }
        let tag = Self::tag_of(hash);
        let i = Self::bucket_of(tag, self.buckets.len());
        let b = &mut self.buckets[i];
        let at = match b.ways.iter().position(|w| w.tag == tag || w.tag == 0) {
            Some(at) => at,
            None => {
                let at = b.next as usize % 3;
                b.next = b.next.wrapping_add(1);
                at
            }
        };
        b.ways[at] = IriWay { tag, ids };
    }

    /// Doubles the buckets. The ways of a bucket go to one of two buckets, so they all fit.
    #[cold]
    fn grow(&mut self) {
        let n = self.buckets.len() * 2;
        let old = std::mem::replace(&mut self.buckets, vec![IriBucket::default(); n]);
        for w in old
            .iter()
            .flat_map(|b| b.ways.iter())
            .filter(|w| w.tag != 0)
        {
            let b = &mut self.buckets[Self::bucket_of(w.tag, n)];
            if let Some(at) = b.ways.iter().position(|x| x.tag == 0) {
                b.ways[at] = *w;
            }
        }
        self.inserts = 0;
    }
}

/// One slot of an [`AddrMemo`]: an IRI's address and length, the epoch it was
/// recorded in, and its ids. 32 bytes, two to a cache line.
#[derive(Debug, Clone, Copy, Default)]
struct MemoSlot {
    addr: usize,
    len: u32,
    epoch: u32,
    ids: CachedIds,
}

/// IRI address → ids, for input whose strings are shared (one copy of each distinct
/// IRI in memory, as an interning parser or an in-memory graph gives them). A
/// direct-mapped cache keyed by the string's address and length: finding a known IRI
/// takes neither a hash of its bytes nor a comparison of them.
///
/// An address identifies a string only while that string is borrowed, so entries are
/// valid for one epoch: the caller starts a new one whenever the borrow that keeps
/// the recorded strings alive may have ended (see `Encoder::shared`). Like the
/// [`IriCache`], it only names ids, whose generations the caller checks, so it never
/// changes the bytes written.
#[derive(Debug)]
pub(crate) struct AddrMemo {
    slots: Vec<MemoSlot>,
    /// Current epoch, never 0 (0 marks an empty slot).
    epoch: u32,
}

impl AddrMemo {
    /// A memo of at least `capacity` slots (rounded up to a power of two).
    pub fn new(capacity: usize) -> Self {
        AddrMemo {
            slots: vec![MemoSlot::default(); capacity.next_power_of_two().max(64)],
            epoch: 1,
        }
    }

    /// Forgets every entry (in O(1): entries of older epochs no longer match).
    pub fn new_epoch(&mut self) {
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == 0 {
            // After 2^32 epochs an old entry could match again: clear them for real.
            self.slots.fill(MemoSlot::default());
            self.epoch = 1;
        }
    }

    #[inline(always)]
    fn index(&self, addr: usize, len: usize) -> usize {
        // Strings sit at least a few bytes apart; the multiply spreads the low bits.
        let h = ((addr as u64) ^ ((len as u64) << 40)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        (h >> 32) as usize & (self.slots.len() - 1)
    }

    /// The ids recorded for the string at `addr` of `len` bytes in this epoch.
    #[inline(always)]
    pub fn get(&self, addr: usize, len: usize) -> Option<CachedIds> {
        let s = self.slots.get(self.index(addr, len))?;
        (s.addr == addr && s.len as usize == len && s.epoch == self.epoch).then_some(s.ids)
    }

    /// Records `ids` for the string at `addr` of `len` bytes (strings of 4 GiB or more
    /// are not recorded).
    #[inline]
    pub fn insert(&mut self, addr: usize, len: usize, ids: CachedIds) {
        let Ok(len32) = u32::try_from(len) else {
            return;
        };
        let i = self.index(addr, len);
        let epoch = self.epoch;
        if let Some(s) = self.slots.get_mut(i) {
            *s = MemoSlot {
                addr,
                len: len32,
                epoch,
                ids,
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assigns_sequential_ids_then_evicts_lru() {
        let mut t = LruTable::new(3);
        assert_eq!(
            t.get_or_insert("a", 1),
            Some(Lookup::New { id: 1, wire_id: 0 })
        );
        assert_eq!(
            t.get_or_insert("b", 2),
            Some(Lookup::New { id: 2, wire_id: 0 })
        );
        assert_eq!(
            t.get_or_insert("c", 3),
            Some(Lookup::New { id: 3, wire_id: 0 })
        );
        assert_eq!(t.get_or_insert("a", 4), Some(Lookup::Hit(1)));
        // LRU is now "b" (id 2).
        assert_eq!(
            t.get_or_insert("d", 5),
            Some(Lookup::New { id: 2, wire_id: 2 })
        );
        assert_eq!(t.value(2), "d");
        assert_eq!(
            t.get_or_insert("b", 6),
            Some(Lookup::New { id: 3, wire_id: 0 })
        );
    }

    #[test]
    fn a_size_zero_table_gives_no_id() {
        // The encoder's prefix table when a stream has none: asking it for an id is
        // refused (the caller's "table too small" error), never a panic.
        let mut t = LruTable::new(0);
        assert_eq!(t.get_or_insert("http://ex.org/", 1), None);
        assert_eq!(t.get_or_insert("", 2), None);
    }

    #[test]
    fn index_stays_consistent_through_growth_and_evictions() {
        // A small table, many distinct values with a skewed reuse pattern: every
        // value held must be found under its id, and nothing else.
        let mut t = LruTable::new(37);
        let mut x = 12345u32;
        for stamp in 1..20_000u32 {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            let v = format!("v{}", (x >> 8) % if stamp % 3 == 0 { 1000 } else { 50 });
            let id = match t.get_or_insert(&v, stamp) {
                Some(Lookup::Hit(id) | Lookup::New { id, .. }) => id,
                None => panic!("table full"),
            };
            assert_eq!(t.value(id), v);
            if stamp % 997 == 0 {
                for id in 1..=t.len {
                    let key = t.value(id).to_owned();
                    let tag = (hash_bytes(key.as_bytes(), t.seed) >> 32) as u32;
                    assert_eq!(t.find(&key, tag), Ok(id));
                }
                assert_eq!(t.index.iter().filter(|&&i| i != 0).count(), t.len as usize);
            }
        }
    }

    #[test]
    fn bytes_eq_matches_slice_equality() {
        let base: Vec<u8> = (0..300u32).map(|i| (i * 7 % 251) as u8).collect();
        for n in [
            0, 1, 3, 4, 7, 8, 15, 16, 17, 31, 32, 33, 64, 255, 256, 257, 300,
        ] {
            let a = &base[..n];
            assert!(bytes_eq(a, a));
            for i in 0..n {
                let mut b = a.to_vec();
                b[i] ^= 1;
                assert!(!bytes_eq(a, &b), "len {n}, byte {i}");
            }
            if n > 0 {
                assert!(!bytes_eq(a, &base[..n - 1]));
            }
        }
    }

    #[test]
    fn never_evicts_an_entry_of_the_current_statement() {
        let mut t = LruTable::new(2);
        t.get_or_insert("a", 7);
        t.get_or_insert("b", 7);
        assert_eq!(t.get_or_insert("c", 7), None);
        assert!(matches!(t.get_or_insert("c", 8), Some(Lookup::New { .. })));
    }
}
