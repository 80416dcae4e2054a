//! The gateway's global allocator: small blocks from mimalloc, large ones from the system's
//! (glibc's) malloc.
//!
//! A request allocates and frees hundreds of small objects (rmcp's JSON-RPC values, header
//! maps, the call's strings): mimalloc's thread-local free lists serve them with a fraction
//! of glibc's work. Large blocks stay with glibc because mimalloc as the only allocator
//! made the semantic index build 1.58× slower and the served index 54 MB larger; the
//! likely cause, not profiled, is candle's tensors, freed and allocated again batch after
//! batch, which mimalloc either kept (resident size) or, tuned to purge, faulted in again.
//! With the split, that build is within the target again (execute: RESULTS-execute-floor.md
//! runs 6 and 8; the build: RESULTS-cold-start.md).
//!
//! Which allocator owns a block follows from its size alone: `dealloc` and `realloc` are
//! given the layout the block was allocated with, so no lookup is needed.

use std::alloc::{GlobalAlloc, Layout, System};

use mimalloc::MiMalloc;

/// Blocks of this size and larger come from the system allocator.
pub const LARGE: usize = 32 * 1024;

/// mimalloc below [`LARGE`], the system allocator from it up.
pub struct SplitAlloc;

fn is_small(size: usize) -> bool {
    size < LARGE
}

// SAFETY: every block is freed and resized by the allocator that made it: both `dealloc`
// and `realloc` receive the block's allocation layout, whose size picks the same side
// as `alloc` did; a `realloc` across the boundary moves the block.
unsafe impl GlobalAlloc for SplitAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract (a non-zero size) is passed on unchanged.
        unsafe {
            if is_small(layout.size()) {
                MiMalloc.alloc(layout)
            } else {
                System.alloc(layout)
            }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as `alloc`.
        unsafe {
            if is_small(layout.size()) {
                MiMalloc.alloc_zeroed(layout)
            } else {
                System.alloc_zeroed(layout)
            }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `layout` is the one `ptr` was allocated with, so its size picks the
        // allocator that made it.
        unsafe {
            if is_small(layout.size()) {
                MiMalloc.dealloc(ptr, layout)
            } else {
                System.dealloc(ptr, layout)
            }
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as `dealloc` for `ptr`; a move across the boundary copies the bytes both
        // blocks hold and frees the old block only once the new one exists.
        unsafe {
            match (is_small(layout.size()), is_small(new_size)) {
                (true, true) => MiMalloc.realloc(ptr, layout, new_size),
                (false, false) => System.realloc(ptr, layout, new_size),
                _ => {
                    let new_layout = Layout::from_size_align_unchecked(new_size, layout.align());
                    let moved = self.alloc(new_layout);
                    if !moved.is_null() {
                        std::ptr::copy_nonoverlapping(ptr, moved, layout.size().min(new_size));
                        self.dealloc(ptr, layout);
                    }
                    moved
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Which allocator owns `ptr`: mimalloc's heap regions hold only its own blocks.
    fn owned_by_mimalloc(ptr: *const u8) -> bool {
        // SAFETY: only compares the address against mimalloc's regions.
        unsafe { libmimalloc_sys::mi_is_in_heap_region(ptr.cast()) }
    }

    #[test]
    fn the_size_picks_the_allocator() {
        let alloc = SplitAlloc;
        for (size, small) in [
            (1, true),
            (LARGE - 1, true),
            (LARGE, false),
            (1 << 20, false),
        ] {
            let layout = Layout::from_size_align(size, 8).unwrap();
            // SAFETY: non-zero sizes; each block is freed with its own layout.
            unsafe {
                let ptr = alloc.alloc(layout);
                assert!(!ptr.is_null());
                assert_eq!(owned_by_mimalloc(ptr), small, "{size} bytes");
                alloc.dealloc(ptr, layout);
            }
        }
    }

    #[test]
    fn realloc_across_the_boundary_moves_the_bytes_to_the_other_allocator() {
        let alloc = SplitAlloc;
        let small = Layout::from_size_align(100, 16).unwrap();
        // SAFETY: each block is used within its size and freed with its current layout.
        unsafe {
            let ptr = alloc.alloc(small);
            for i in 0..100 {
                *ptr.add(i) = i as u8;
            }
            let grown = alloc.realloc(ptr, small, LARGE + 1);
            assert!(!owned_by_mimalloc(grown));
            assert_eq!(grown.align_offset(16), 0);
            assert!((0..100).all(|i| *grown.add(i) == i as u8));
            let large = Layout::from_size_align(LARGE + 1, 16).unwrap();
            let shrunk = alloc.realloc(grown, large, 50);
            assert!(owned_by_mimalloc(shrunk));
            assert!((0..50).all(|i| *shrunk.add(i) == i as u8));
            alloc.dealloc(shrunk, Layout::from_size_align(50, 16).unwrap());
        }
    }

    #[test]
    fn zeroed_blocks_are_zero_on_both_sides() {
        let alloc = SplitAlloc;
        for size in [64, LARGE * 2] {
            let layout = Layout::from_size_align(size, 8).unwrap();
            // SAFETY: read within the block, freed with its layout.
            unsafe {
                let ptr = alloc.alloc_zeroed(layout);
                assert!((0..size).all(|i| *ptr.add(i) == 0));
                alloc.dealloc(ptr, layout);
            }
        }
    }
}
