//! Encoder-side lookup tables: least-recently-used id assignment in flat arrays.

use foldhash::fast::FixedState;
use hashbrown::HashMap;

/// Result of looking a value up in an [`LruTable`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lookup {
    /// Already in the table under this id.
    Hit(u32),
    /// Newly assigned this id; the caller must emit an entry row. `wire_id` is the
    /// value to write in the entry's `id` field (0 when it follows the previous entry).
    New { id: u32, wire_id: u32 },
}

/// A lookup table of at most `max` entries with ids 1..=max. When full, a new value
/// takes the id of an entry not used recently, chosen by the clock (second-chance)
/// approximation of LRU: a hit only sets a flag, so the hot path does one store
/// instead of relinking a list.
#[derive(Debug)]
pub(crate) struct LruTable {
    map: HashMap<Box<str>, u32, FixedState>,
    keys: Vec<Box<str>>,
    /// Set on every use; cleared when the clock hand passes.
    referenced: Vec<bool>,
    /// Statement stamp of the last use of each id, so an eviction never removes an
    /// entry the statement being encoded refers to.
    stamp: Vec<u32>,
    /// Bumped each time an id is (re)assigned, so caches can tell a stale id.
    generation: Vec<u32>,
    /// Next eviction candidate.
    hand: u32,
    len: u32,
    max: u32,
    last_emitted: u32,
}

impl LruTable {
    pub fn new(max: u32) -> Self {
        let n = max as usize + 1;
        LruTable {
            map: HashMap::with_capacity_and_hasher(
                (max as usize).min(1 << 16),
                FixedState::default(),
            ),
            keys: vec![Box::from(""); n],
            referenced: vec![false; n],
            stamp: vec![0; n],
            generation: vec![0; n],
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
            if self.stamp[id as usize] == stamp {
                continue;
            }
            if self.referenced[id as usize] {
                self.referenced[id as usize] = false;
                continue;
            }
            return Some(id);
        }
        None
    }

    /// Looks `value` up, assigning an id (and evicting) on a miss.
    /// Returns `None` when every entry is in use by the current statement.
    #[inline]
    pub fn get_or_insert(&mut self, value: &str, stamp: u32) -> Option<Lookup> {
        if let Some(&id) = self.map.get(value) {
            self.touch(id, stamp);
            return Some(Lookup::Hit(id));
        }
        let id = if self.len < self.max {
            self.len += 1;
            self.len
        } else {
            let victim = self.victim(stamp)?;
            let old = std::mem::take(&mut self.keys[victim as usize]);
            self.map.remove(&old);
            victim
        };
        self.generation[id as usize] = self.generation[id as usize].wrapping_add(1);
        let boxed: Box<str> = Box::from(value);
        self.map.insert(boxed.clone(), id);
        self.keys[id as usize] = boxed;
        self.referenced[id as usize] = false;
        self.stamp[id as usize] = stamp;
        let wire_id = if id == self.last_emitted.wrapping_add(1) {
            0
        } else {
            id
        };
        self.last_emitted = id;
        Some(Lookup::New { id, wire_id })
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
        self.generation[id as usize]
    }

    /// Marks `id` as just used.
    #[inline]
    pub fn touch(&mut self, id: u32, stamp: u32) {
        self.referenced[id as usize] = true;
        self.stamp[id as usize] = stamp;
    }

    /// The value stored under `id`.
    #[cfg(test)]
    pub fn value(&self, id: u32) -> &str {
        &self.keys[id as usize]
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
    fn never_evicts_an_entry_of_the_current_statement() {
        let mut t = LruTable::new(2);
        t.get_or_insert("a", 7);
        t.get_or_insert("b", 7);
        assert_eq!(t.get_or_insert("c", 7), None);
        assert!(matches!(t.get_or_insert("c", 8), Some(Lookup::New { .. })));
    }
}
