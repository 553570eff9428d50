//! Encoder-side lookup tables: least-recently-used id assignment in flat arrays.

use foldhash::fast::FixedState;
use hashbrown::HashMap;

const NONE: u32 = 0;

/// Result of looking a value up in an [`LruTable`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lookup {
    /// Already in the table under this id.
    Hit(u32),
    /// Newly assigned this id; the caller must emit an entry row. `wire_id` is the
    /// value to write in the entry's `id` field (0 when it follows the previous entry).
    New { id: u32, wire_id: u32 },
}

/// A lookup table of at most `max` entries with ids 1..=max, evicting the least
/// recently used entry when full. The LRU list is a doubly linked list over ids,
/// stored in two flat arrays.
#[derive(Debug)]
pub(crate) struct LruTable {
    map: HashMap<Box<str>, u32, FixedState>,
    keys: Vec<Box<str>>,
    prev: Vec<u32>,
    next: Vec<u32>,
    /// Statement stamp of the last use of each id, so an eviction never removes an
    /// entry the statement being encoded refers to.
    stamp: Vec<u32>,
    /// Bumped each time an id is (re)assigned, so caches can tell a stale id.
    generation: Vec<u32>,
    head: u32,
    tail: u32,
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
            prev: vec![NONE; n],
            next: vec![NONE; n],
            stamp: vec![0; n],
            generation: vec![0; n],
            head: NONE,
            tail: NONE,
            len: 0,
            max,
            last_emitted: 0,
        }
    }

    #[inline]
    fn unlink(&mut self, id: u32) {
        let (p, n) = (self.prev[id as usize], self.next[id as usize]);
        if p != NONE {
            self.next[p as usize] = n;
        } else {
            self.head = n;
        }
        if n != NONE {
            self.prev[n as usize] = p;
        } else {
            self.tail = p;
        }
    }

    #[inline]
    fn push_front(&mut self, id: u32) {
        self.prev[id as usize] = NONE;
        self.next[id as usize] = self.head;
        if self.head != NONE {
            self.prev[self.head as usize] = id;
        } else {
            self.tail = id;
        }
        self.head = id;
    }

    /// Looks `value` up, assigning an id (and evicting) on a miss.
    /// Returns `None` when every entry is in use by the current statement.
    #[inline]
    pub fn get_or_insert(&mut self, value: &str, stamp: u32) -> Option<Lookup> {
        if let Some(&id) = self.map.get(value) {
            if self.head != id {
                self.unlink(id);
                self.push_front(id);
            }
            self.stamp[id as usize] = stamp;
            return Some(Lookup::Hit(id));
        }
        let id = if self.len < self.max {
            self.len += 1;
            self.len
        } else {
            let victim = self.tail;
            if victim == NONE || self.stamp[victim as usize] == stamp {
                return None;
            }
            self.unlink(victim);
            let old = std::mem::take(&mut self.keys[victim as usize]);
            self.map.remove(&old);
            victim
        };
        self.generation[id as usize] = self.generation[id as usize].wrapping_add(1);
        let boxed: Box<str> = Box::from(value);
        self.map.insert(boxed.clone(), id);
        self.keys[id as usize] = boxed;
        self.push_front(id);
        self.stamp[id as usize] = stamp;
        let wire_id = if id == self.last_emitted + 1 { 0 } else { id };
        self.last_emitted = id;
        Some(Lookup::New { id, wire_id })
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

    /// Marks `id` as just used (a hit found through a cache rather than [`LruTable::get_or_insert`]).
    #[inline]
    pub fn touch(&mut self, id: u32, stamp: u32) {
        if self.head != id {
            self.unlink(id);
            self.push_front(id);
        }
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
