//! A global allocator that aborts on any one allocation over [`MAX_ALLOCATION`], so
//! that a hostile length or count allocated up front is a finding.
//!
//! Why: libFuzzer's `-malloc_limit_mb` watches allocations through a sanitizer's
//! allocator hooks, which a stable build (no AddressSanitizer) does not have; and
//! `-rss_limit_mb` sees only memory that is touched, not a `Vec::with_capacity` of
//! gigabytes that is filled as input arrives. The abort is a crash to libFuzzer: it
//! keeps the input.

use std::alloc::{GlobalAlloc, Layout, System};

/// The largest single allocation allowed (what `stable.sh` gives `-malloc_limit_mb`).
pub const MAX_ALLOCATION: usize = 512 << 20;

/// The system allocator, refusing allocations over [`MAX_ALLOCATION`].
pub struct Limited;

#[cold]
fn too_large(size: usize) -> ! {
    // No formatting machinery that could allocate: a fixed message, then the size.
    eprintln!("alloc_limit: an allocation of {size} bytes (over {MAX_ALLOCATION})");
    std::process::abort()
}

// SAFETY: every call is passed on to `System` unchanged, or the process aborts.
unsafe impl GlobalAlloc for Limited {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.size() > MAX_ALLOCATION {
            too_large(layout.size());
        }
        // SAFETY: the caller's contract for `alloc`, passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if layout.size() > MAX_ALLOCATION {
            too_large(layout.size());
        }
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size > MAX_ALLOCATION {
            too_large(new_size);
        }
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static LIMITED: Limited = Limited;
