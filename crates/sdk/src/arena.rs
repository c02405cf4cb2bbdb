//! The bump arena: the guest's global allocator.
//!
//! Every request runs in a fresh instance that is thrown away afterwards, so memory never needs
//! to be given back: `dealloc` does nothing, and allocation is a pointer bump.
//!
//! ```text
//!  0            __heap_base                 next                 end = memory.size × 64 KiB
//!  │ stack│data │ request │ response │ …     │       free          │
//!  └──────┴─────┴─────────┴──────────┴──────┴─────────────────────┘
//!                                            ▲ alloc: align `next`, bump it; past `end`,
//!                                              memory.grow by whole pages or return null
//! ```
//!
//! `realloc` of the most recent block grows it in place, so a `Vec` that is pushed to while
//! nothing else allocates never copies, and shrinks it in place, giving the tail back: a buffer
//! sized for the worst case and cut to what the host wrote (a KV value, a fetched response)
//! costs only what it kept. Bytes given back may have been written, so the arena remembers how
//! far memory was ever handed out (`dirty`), and `alloc_zeroed` clears the part of a block
//! below that mark; above it, fresh memory is zero already. All `unsafe` of the SDK lives in
//! this module and in `sys`.

use core::alloc::{GlobalAlloc, Layout};
use core::cell::Cell;

/// The Wasm page size.
pub const PAGE: usize = 65536;

/// Where the arena gets its memory from: the guest's linear memory on wasm32, a fixed buffer in
/// native tests.
///
/// Every byte from the first free address up to the end, and every byte that [`Memory::grow`]
/// adds, must read as zero. Wasm linear memory guarantees this for a fresh instance, and it
/// lets `alloc_zeroed` skip the memset: the bump pointer never hands out a byte twice.
pub trait Memory {
    /// The first free address and the current end of memory, read on the first allocation.
    fn bounds(&self) -> (usize, usize);
    /// Grows memory by `pages` pages; returns the new end, or `None` if the host refused.
    fn grow(&self, pages: usize) -> Option<usize>;
}

/// The bump allocator. Not thread-safe: wasm32 guests are single-threaded.
#[derive(Debug)]
pub struct Arena<M> {
    memory: M,
    next: Cell<usize>,
    end: Cell<usize>,
    /// Every byte at or above this address has never been handed out, so it is zero.
    dirty: Cell<usize>,
}

// SAFETY: the arena is only used as the global allocator of a single-threaded wasm32 guest
// (wasm32-unknown-unknown has no threads), and natively only from one test thread at a time
// (`Arena` values in tests are local).
unsafe impl<M: Sync> Sync for Arena<M> {}

/// Where a block of `layout` starts and where the next free byte is after it, given the current
/// `next`; `None` on address overflow.
fn bump(next: usize, layout: Layout) -> Option<(usize, usize)> {
    let start = next.checked_add(layout.align() - 1)? & !(layout.align() - 1);
    Some((start, start.checked_add(layout.size())?))
}

impl<M: Memory> Arena<M> {
    /// An arena over `memory`; nothing is read until the first allocation.
    pub const fn new(memory: M) -> Self {
        Self { memory, next: Cell::new(0), end: Cell::new(0), dirty: Cell::new(0) }
    }

    /// Bytes handed out so far (including alignment padding).
    pub fn used(&self) -> usize {
        let (base, _) = self.memory.bounds();
        self.next.get().saturating_sub(base)
    }

    /// Reserves `layout`; returns its address, or `None` when memory cannot grow.
    pub fn allocate(&self, layout: Layout) -> Option<usize> {
        if self.end.get() == 0 {
            let (base, end) = self.memory.bounds();
            self.next.set(base);
            self.end.set(end);
        }
        let (start, new_next) = bump(self.next.get(), layout)?;
        self.ensure(new_next)?;
        self.set_next(new_next);
        Some(start)
    }

    fn set_next(&self, next: usize) {
        self.next.set(next);
        self.dirty.set(self.dirty.get().max(next));
    }

    /// Shrinks the block at `addr` (the most recent one) in place to `new_size`, giving the rest
    /// back. Returns whether it did (not when another block follows it).
    pub fn shrink_in_place(&self, addr: usize, old_size: usize, new_size: usize) -> bool {
        if addr.checked_add(old_size) != Some(self.next.get()) || new_size > old_size {
            return false;
        }
        self.next.set(addr + new_size);
        true
    }

    /// Grows the block at `addr` (the most recent one) in place to `new_size`, if it is the
    /// last block and memory allows. Returns whether it did.
    pub fn grow_in_place(&self, addr: usize, old_size: usize, new_size: usize) -> bool {
        if addr.checked_add(old_size) != Some(self.next.get()) {
            return false;
        }
        let Some(new_next) = addr.checked_add(new_size) else { return false };
        if self.ensure(new_next).is_none() {
            return false;
        }
        self.set_next(new_next);
        true
    }

    fn ensure(&self, new_next: usize) -> Option<()> {
        if new_next > self.end.get() {
            let missing = new_next - self.end.get();
            let pages = missing.div_ceil(PAGE);
            self.end.set(self.memory.grow(pages)?);
        }
        Some(())
    }
}

// SAFETY: `alloc` returns either null or an address inside linear memory that is aligned for
// `layout`, at least `layout.size()` bytes long, and not part of any live block (the bump
// pointer only moves back when `realloc` shrinks the most recent block, over bytes that block
// no longer owns). `dealloc` does nothing, which is allowed: memory is reclaimed when the
// instance is dropped.
unsafe impl<M: Memory> GlobalAlloc for Arena<M> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        match self.allocate(layout) {
            Some(addr) => addr as *mut u8,
            None => core::ptr::null_mut(),
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let dirty_before = self.dirty.get();
        // SAFETY: same contract as `alloc`.
        let ptr = unsafe { self.alloc(layout) };
        if !ptr.is_null() {
            // Bytes above the old dirty mark were never handed out: `Memory` guarantees they
            // are zero. Only those below it are cleared.
            let stale = dirty_before.saturating_sub(ptr as usize).min(layout.size());
            // SAFETY: `ptr` is valid for `layout.size()` bytes, and `stale` is at most that.
            unsafe { core::ptr::write_bytes(ptr, 0, stale) };
        }
        ptr
    }

    unsafe fn dealloc(&self, _ptr: *mut u8, _layout: Layout) {}

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size <= layout.size() {
            self.shrink_in_place(ptr as usize, layout.size(), new_size);
            return ptr;
        }
        if self.grow_in_place(ptr as usize, layout.size(), new_size) {
            return ptr;
        }
        // SAFETY: `new_size` is non-zero and, rounded up to `align`, does not overflow isize:
        // both are guaranteed by `GlobalAlloc::realloc`'s contract.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        // SAFETY: the layout has non-zero size (see above).
        let new_ptr = unsafe { self.alloc(new_layout) };
        if !new_ptr.is_null() {
            // SAFETY: both blocks are valid for `layout.size()` bytes (the old one by the
            // caller's contract, the new one because it is larger) and distinct, as the new
            // one was bumped past the old one.
            unsafe { core::ptr::copy_nonoverlapping(ptr, new_ptr, layout.size()) };
        }
        new_ptr
    }
}

/// The guest's linear memory, above `__heap_base`.
#[cfg(target_arch = "wasm32")]
#[derive(Debug)]
pub struct LinearMemory;

#[cfg(target_arch = "wasm32")]
impl Memory for LinearMemory {
    fn bounds(&self) -> (usize, usize) {
        (crate::sys::heap_base(), core::arch::wasm32::memory_size(0) * PAGE)
    }

    fn grow(&self, pages: usize) -> Option<usize> {
        let old = core::arch::wasm32::memory_grow(0, pages);
        (old != usize::MAX).then(|| (old + pages) * PAGE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell as StdCell;

    /// A pretend memory: addresses start at `base`, `pages` are mapped, at most `max` pages.
    struct FakeMemory {
        base: usize,
        pages: StdCell<usize>,
        max: usize,
    }

    impl Memory for FakeMemory {
        fn bounds(&self) -> (usize, usize) {
            (self.base, self.pages.get() * PAGE)
        }
        fn grow(&self, pages: usize) -> Option<usize> {
            let new = self.pages.get() + pages;
            (new <= self.max).then(|| {
                self.pages.set(new);
                new * PAGE
            })
        }
    }

    fn arena(base: usize, pages: usize, max: usize) -> Arena<FakeMemory> {
        Arena::new(FakeMemory { base, pages: StdCell::new(pages), max })
    }

    fn layout(size: usize, align: usize) -> Layout {
        Layout::from_size_align(size, align).unwrap()
    }

    #[test]
    fn bumps_and_aligns() {
        let a = arena(1001, 1, 1);
        assert_eq!(a.allocate(layout(3, 1)), Some(1001));
        assert_eq!(a.allocate(layout(8, 8)), Some(1008));
        assert_eq!(a.allocate(layout(1, 16)), Some(1024));
        assert_eq!(a.used(), 1025 - 1001);
    }

    #[test]
    fn grows_memory_by_whole_pages() {
        let a = arena(0, 1, 4);
        assert_eq!(a.allocate(layout(PAGE, 1)), Some(0));
        assert_eq!(a.memory.pages.get(), 1);
        assert_eq!(a.allocate(layout(PAGE + 1, 1)), Some(PAGE));
        assert_eq!(a.memory.pages.get(), 3);
    }

    #[test]
    fn refuses_past_the_limit_and_stays_usable() {
        let a = arena(0, 1, 2);
        assert_eq!(a.allocate(layout(3 * PAGE, 1)), None);
        assert_eq!(a.allocate(layout(16, 1)), Some(0), "a failed allocation must not leak space");
    }

    #[test]
    fn overflowing_requests_fail() {
        let a = arena(usize::MAX - 4, 1, 1);
        assert_eq!(a.allocate(layout(16, 1)), None);
    }

    #[test]
    fn realloc_extends_the_last_block_in_place() {
        let a = arena(64, 1, 2);
        let l = layout(10, 1);
        // SAFETY: the fake memory's addresses are never dereferenced when growing in place.
        let p = unsafe { a.alloc(l) };
        // SAFETY: as above; `p` is the last block, so no copy happens.
        let q = unsafe { a.realloc(p, l, 100) };
        assert_eq!(p, q);
        assert_eq!(a.used(), 100);
        let other = a.allocate(layout(1, 1)).unwrap();
        assert_eq!(other, 164);
        assert!(!a.grow_in_place(p as usize, 100, 200), "no longer the last block");
    }

    #[test]
    fn realloc_shrinks_the_last_block_and_zeroed_blocks_stay_zero() {
        let buffer: &'static Buffer = leaked_buffer(4096);
        let a = Arena::new(buffer);
        // SAFETY: the arena hands out addresses inside `buffer`, which lives forever.
        unsafe {
            let p = a.alloc_zeroed(layout(1024, 1));
            p.write_bytes(0xAB, 1024);
            let q = a.realloc(p, layout(1024, 1), 16);
            assert_eq!(p, q);
            assert_eq!(a.used(), 16, "the tail was given back");
            let r = a.alloc_zeroed(layout(2048, 1));
            assert_eq!(r, p.add(16), "the tail is reused");
            let bytes = core::slice::from_raw_parts(r, 2048);
            assert!(bytes.iter().all(|&b| b == 0), "written bytes given back are cleared");
            let _blocker = a.alloc(layout(1, 1));
            let _ = a.realloc(r, layout(2048, 1), 8);
            assert_eq!(a.used(), 16 + 2048 + 1, "not the last block: nothing given back");
        }
    }

    /// A real buffer, so copies and writes happen on memory that exists.
    struct Buffer(std::boxed::Box<[u8]>);
    // SAFETY (for Sync): each buffer is only used from one test's thread.
    unsafe impl Sync for Buffer {}
    impl Memory for &'static Buffer {
        fn bounds(&self) -> (usize, usize) {
            let start = self.0.as_ptr() as usize;
            (start, start + self.0.len())
        }
        fn grow(&self, _pages: usize) -> Option<usize> {
            None
        }
    }

    fn leaked_buffer(len: usize) -> &'static Buffer {
        std::boxed::Box::leak(std::boxed::Box::new(Buffer(std::vec![0u8; len].into_boxed_slice())))
    }

    #[test]
    fn works_as_a_real_allocator_over_a_buffer() {
        // realloc's copy path, on memory that exists.
        let buffer = leaked_buffer(4096);
        let a = Arena::new(buffer);
        let l = layout(4, 4);
        // SAFETY: the arena hands out addresses inside `buffer`, which lives forever.
        unsafe {
            let p = a.alloc(l);
            p.copy_from_nonoverlapping(b"abcd".as_ptr(), 4);
            let _blocker = a.alloc(layout(1, 1));
            let q = a.realloc(p, l, 8);
            assert_ne!(p, q, "p is not the last block, so it must move");
            assert_eq!(core::slice::from_raw_parts(q, 4), b"abcd");
            assert!(a.alloc(layout(8192, 1)).is_null(), "beyond the buffer");
        }
    }
}
