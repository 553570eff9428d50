//! A group's bounded ring of shared blocks, and where a subscriber at a given offset
//! stands against it.
//!
//! Blocks are numbered (`seq`) and cover ranges of offsets: block `seq` holds the
//! accepted items of `[start, end)`. Blocks are pushed in order and never overlap.
//! Offsets below `processed` that no block covers held only items the group's filter
//! rejected. `floor` is the end of the newest block that was dropped from the ring:
//! the group's knowledge starts there.

use std::collections::VecDeque;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use tokio::sync::watch;

use super::encode::Wire;

/// How much history a group keeps for subscribers that lag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingLimits {
    /// At most this many blocks.
    pub max_blocks: usize,
    /// At most about this many bytes of blocks (the newest block is always kept).
    pub max_bytes: usize,
}

impl Default for RingLimits {
    fn default() -> Self {
        RingLimits {
            max_blocks: 256,
            max_bytes: 4 << 20,
        }
    }
}

/// A batch of a group's output, shared by all its subscribers.
#[derive(Debug)]
pub struct SharedBlock {
    /// First offset covered.
    pub start: u64,
    /// Offset after the last one covered (covers rejected items too).
    pub end: u64,
    /// Items in the block.
    pub items: u32,
    pub wire: Wire,
    /// The same items as a subscriber's first output: the Jelly options row in the
    /// first item. Made once, by the first subscriber that starts here, for all
    /// that start here (not counted in the ring's byte bound).
    pub opening: tokio::sync::OnceCell<Arc<Wire>>,
}

/// Why a group stopped producing blocks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupEnd {
    /// The topic's log was closed.
    Closed,
    /// The log could not be read.
    ReadFailed(String),
    /// A stored item could not be written in the group's format.
    DeliverFailed { offset: u64, message: String },
}

/// Where a subscriber whose next offset is `next` stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// Take shared blocks from `seq` on.
    Join(u64),
    /// Start with the opening form of block `seq` (the subscriber owes the options
    /// row, and everything between it and the block was rejected).
    Open(u64),
    /// Read the log privately up to (not including) `stop`, then look again.
    Private { stop: u64 },
    /// Nothing to send until the group moves on.
    Wait,
}

/// The ring's state (behind the ring's lock).
#[derive(Debug)]
pub struct RingState {
    blocks: VecDeque<Arc<SharedBlock>>,
    first_seq: u64,
    floor: u64,
    processed: u64,
    bytes: usize,
    ended: Option<GroupEnd>,
}

/// What a reader of block `seq` finds.
#[derive(Debug)]
pub enum Lookup {
    Block(Arc<SharedBlock>),
    /// The block was dropped: the reader lagged by more than the ring holds.
    Dropped,
    /// Not written yet.
    Pending,
    /// Not written, and never will be.
    Ended(GroupEnd),
}

impl RingState {
    /// The number the next pushed block gets.
    pub fn head_seq(&self) -> u64 {
        self.first_seq + self.blocks.len() as u64
    }

    /// The group has handled every offset below this.
    pub fn processed(&self) -> u64 {
        self.processed
    }

    /// Block `seq`.
    pub fn get(&self, seq: u64) -> Lookup {
        if seq < self.first_seq {
            return Lookup::Dropped;
        }
        match self.blocks.get((seq - self.first_seq) as usize) {
            Some(b) => Lookup::Block(b.clone()),
            None => match &self.ended {
                Some(e) => Lookup::Ended(e.clone()),
                None => Lookup::Pending,
            },
        }
    }

    /// Where a subscriber at `next` stands. `owes_options`: its next output must
    /// carry the Jelly options row, so it starts with a block's opening form.
    pub fn place(&self, next: u64, owes_options: bool) -> Place {
        if next < self.floor {
            return Place::Private { stop: self.floor };
        }
        if next > self.processed {
            return Place::Wait;
        }
        let idx = self.blocks.partition_point(|b| b.end <= next);
        let seq = self.first_seq + idx as u64;
        match self.blocks.get(idx) {
            Some(b) if b.start < next => Place::Private { stop: b.end },
            Some(_) if owes_options => Place::Open(seq),
            Some(_) => Place::Join(seq),
            None if owes_options => Place::Wait,
            None => Place::Join(self.head_seq()),
        }
    }

    /// Why the group ended, if it did.
    pub fn ended(&self) -> Option<&GroupEnd> {
        self.ended.as_ref()
    }
}

/// The ring, and a version number that changes with every change of it.
pub struct Ring {
    /// Read by every subscriber for every block, written by the group's task only.
    state: RwLock<RingState>,
    version: watch::Sender<u64>,
    limits: RingLimits,
}

impl Ring {
    /// An empty ring whose group starts at offset `start`.
    pub fn new(start: u64, limits: RingLimits) -> Ring {
        Ring {
            state: RwLock::new(RingState {
                blocks: VecDeque::new(),
                first_seq: 0,
                floor: start,
                processed: start,
                bytes: 0,
                ended: None,
            }),
            version: watch::channel(0).0,
            limits,
        }
    }

    /// The state, for reading (never held across an await).
    pub fn read(&self) -> RwLockReadGuard<'_, RingState> {
        // A panic while holding the lock cannot leave the ring half-changed: every
        // change below is completed before anything that could panic.
        self.state.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, RingState> {
        self.state.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Watches the version (subscribers wait on it).
    pub fn watch(&self) -> watch::Receiver<u64> {
        self.version.subscribe()
    }

    fn changed(&self) {
        self.version.send_modify(|v| *v += 1);
    }

    /// Adds a block covering `[processed, end)`, dropping the oldest blocks beyond
    /// the limits (the newest is always kept).
    pub fn push(&self, end: u64, items: u32, wire: Wire) {
        {
            let mut st = self.write();
            let block = Arc::new(SharedBlock {
                start: st.processed,
                end,
                items,
                wire,
                opening: tokio::sync::OnceCell::new(),
            });
            st.bytes += block.wire.len();
            st.processed = end;
            st.blocks.push_back(block);
            while st.blocks.len() > 1
                && (st.blocks.len() > self.limits.max_blocks || st.bytes > self.limits.max_bytes)
            {
                if let Some(old) = st.blocks.pop_front() {
                    st.bytes -= old.wire.len();
                    st.floor = old.end;
                    st.first_seq += 1;
                }
            }
        }
        self.changed();
    }

    /// Records that every offset below `end` is handled, without a block (the items
    /// were all rejected by the filter).
    pub fn skip_to(&self, end: u64) {
        self.write().processed = end;
        self.changed();
    }

    /// The group lost offsets below `first` (log retention overtook it): everything
    /// it knew is dropped and it starts over at `first`.
    ///
    /// The block numbers skip one: a subscriber waiting for the next block (at the
    /// head) finds it dropped, and is placed again by its own offset. Otherwise it
    /// would take the first block after the restart and skip the lost items without
    /// a word; placed again, it reads the log, which ends its stream if its next item
    /// has left retention.
    pub fn restart_at(&self, first: u64) {
        {
            let mut st = self.write();
            let n = st.blocks.len() as u64;
            st.blocks.clear();
            st.first_seq += n + 1;
            st.bytes = 0;
            st.floor = first;
            st.processed = first;
        }
        self.changed();
    }

    /// The group will produce no more blocks.
    pub fn end(&self, why: GroupEnd) {
        self.write().ended.get_or_insert(why);
        self.changed();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ring(limits: RingLimits) -> Ring {
        Ring::new(10, limits)
    }

    fn wire(n: usize) -> Wire {
        Wire::Messages(vec![bytes::Bytes::from(vec![0u8; n])])
    }

    #[test]
    fn a_restart_drops_what_the_head_waits_for() {
        let r = ring(RingLimits::default());
        r.push(15, 5, wire(10)); // seq 0: [10, 15)
        // A subscriber took block 0 and waits for block 1.
        assert!(matches!(r.read().get(1), Lookup::Pending));
        // Retention overtook the group: offsets 15..30 are gone.
        r.restart_at(30);
        let st = r.read();
        assert!(
            matches!(st.get(1), Lookup::Dropped),
            "not a block after the gap"
        );
        assert_eq!(st.place(15, false), Place::Private { stop: 30 });
        drop(st);
        // Blocks after the restart are found by subscribers placed at 30.
        r.push(35, 5, wire(10));
        let st = r.read();
        assert_eq!(st.place(30, false), Place::Join(2));
        assert!(matches!(st.get(2), Lookup::Block(b) if b.start == 30));
    }

    #[test]
    fn places() {
        let r = ring(RingLimits::default());
        assert_eq!(r.read().place(10, false), Place::Join(0));
        assert_eq!(r.read().place(10, true), Place::Wait);
        assert_eq!(r.read().place(11, false), Place::Wait, "ahead of the group");
        assert_eq!(r.read().place(5, false), Place::Private { stop: 10 });
        r.push(15, 5, wire(10)); // seq 0: [10, 15)
        r.skip_to(20); // [15, 20) rejected
        r.push(25, 5, wire(10)); // seq 1: [20, 25)
        let st = r.read();
        assert_eq!(st.place(10, false), Place::Join(0));
        assert_eq!(st.place(10, true), Place::Open(0));
        assert_eq!(st.place(12, false), Place::Private { stop: 15 }, "inside");
        assert_eq!(
            st.place(15, false),
            Place::Join(1),
            "a gap of rejected items"
        );
        assert_eq!(
            st.place(17, true),
            Place::Open(1),
            "rejected items, then block 1"
        );
        assert_eq!(st.place(21, true), Place::Private { stop: 25 });
        assert_eq!(st.place(25, false), Place::Join(2));
        assert_eq!(st.place(25, true), Place::Wait);
    }

    #[test]
    fn drops_oldest_beyond_limits() {
        let r = ring(RingLimits {
            max_blocks: 2,
            max_bytes: 1000,
        });
        r.push(11, 1, wire(10));
        r.push(12, 1, wire(10));
        r.push(13, 1, wire(10));
        let st = r.read();
        assert!(matches!(st.get(0), Lookup::Dropped));
        assert!(matches!(st.get(1), Lookup::Block(b) if b.start == 11));
        assert!(matches!(st.get(3), Lookup::Pending));
        assert_eq!(st.place(10, false), Place::Private { stop: 11 });
        drop(st);
        r.push(14, 1, wire(5000));
        let st = r.read();
        assert_eq!(st.head_seq(), 4);
        assert!(matches!(st.get(3), Lookup::Block(_)), "the newest is kept");
        assert!(matches!(st.get(2), Lookup::Dropped));
    }
}
