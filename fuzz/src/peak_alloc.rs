//! A global allocator that tracks live and peak heap bytes, so `decode_frame` can check that
//! decoding a frame never allocates more than the frame cap, whatever length prefixes it
//! claims. Install it with `#[global_allocator]`; [`PeakAlloc::is_installed`] tells a harness
//! whether the figures are real.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};

/// The system allocator plus live/peak byte counters.
///
/// The counters are per thread: a measurement sees only what its own thread allocates, so
/// tests running in parallel (and the test harness's own threads) cannot move each other's
/// figures. "Live" is what this thread allocated minus what it freed; memory freed on another
/// thread than the one that allocated it only skews the threads' live figures, never a
/// measurement's peak over a stretch of code that allocates and frees on one thread.
#[derive(Debug)]
pub struct PeakAlloc;

thread_local! {
    // Const-initialised `Cell`s without destructors: reading them never allocates, so the
    // allocator may use them.
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}
static INSTALLED: AtomicBool = AtomicBool::new(false);

impl PeakAlloc {
    /// Whether this allocator serves the process (it has seen an allocation).
    pub fn is_installed() -> bool {
        INSTALLED.load(Ordering::Relaxed)
    }

    /// Starts a measurement on this thread: the peak restarts from what is live now.
    pub fn reset_peak() {
        PEAK.set(LIVE.get());
    }

    /// Bytes live now on this thread's account (allocated here minus freed here).
    pub fn live() -> isize {
        LIVE.get()
    }

    /// Most bytes live at once on this thread's account since [`PeakAlloc::reset_peak`].
    pub fn peak() -> isize {
        PEAK.get()
    }

    /// Bytes held at the peak since `before` (a [`PeakAlloc::live`] reading), never negative.
    pub fn held_since(before: isize) -> usize {
        usize::try_from(Self::peak() - before).unwrap_or(0)
    }

    fn grew(size: usize) {
        let size = isize::try_from(size).unwrap_or(isize::MAX);
        // `try_with`: a thread's last frees may come after its locals are gone.
        let _ = LIVE.try_with(|live| {
            let now = live.get().saturating_add(size);
            live.set(now);
            let _ = PEAK.try_with(|peak| peak.set(peak.get().max(now)));
        });
    }

    fn shrank(size: usize) {
        let size = isize::try_from(size).unwrap_or(isize::MAX);
        let _ = LIVE.try_with(|live| live.set(live.get().saturating_sub(size)));
    }
}

// SAFETY: every call forwards to `System` with the caller's arguments unchanged; the counters
// are bookkeeping only.
unsafe impl GlobalAlloc for PeakAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        INSTALLED.store(true, Ordering::Relaxed);
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract, passed on unchanged.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            Self::grew(layout.size());
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated by `System` with `layout` (see `alloc`).
        unsafe { System.dealloc(ptr, layout) };
        Self::shrank(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as for `alloc` and `dealloc`.
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            Self::shrank(layout.size());
            Self::grew(new_size);
        }
        new
    }
}
