//! How the process asks the operating system for memory: glibc malloc's tunables
//! ([`tune_malloc`]), and the buffer an input file is read into ([`input_buffer`]): its pages
//! mapped in one call rather than one fault at a time ([`populate`]), and huge ones
//! ([`Allocator`], [`with_huge_pages`]).

/// Sets glibc malloc's tunables for a process that allocates a few large buffers and many
/// small values, then exits.
///
/// - **Arenas: one per core, at least two** (its default is eight per core). Each thread that
///   allocates while another holds an arena gets one of its own, and what a thread frees stays
///   in its arena: on 2 cores the threads that parse a large input left about 8 MB more
///   resident at the peak of a 4M-token run (94.5 MB against 86.5 MB with two arenas), for no
///   speed (0.999x-1.001x in alternating pairs; one arena was 4-9% slower). One per core keeps
///   the parallel counting and `serve`'s workers from queueing on a lock on larger machines.
/// - **Large blocks from the heap, and the heap's top kept** ([`MMAP_THRESHOLD`],
///   [`TRIM_THRESHOLD`]). By default a block from 128 KiB on is a mapping of its own, unmapped
///   when freed, and the threshold then follows the largest block freed; the heap's free top
///   is returned to the system past 128 KiB. Either way what the next buffer uses are new
///   pages, each zeroed by the kernel on its first touch (about a microsecond a page on a
///   2-core VM, more than 2,000 pages a `compress` turn at 1M tokens). With both fixed, a freed
///   buffer's pages are reused: a turn 0.944x the time (30 alternating pairs), a first run at
///   1M tokens 0.965x (16); peak RSS the same at 1M tokens, 1.4 MB and 2.8 MB more at 2M and 4M.
///
/// Set first thing in `main`, before any other thread exists. Other C libraries have their own
/// policies and are left alone.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub(crate) fn tune_malloc() {
    let cores = std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get);
    let arenas = libc::c_int::try_from(cores.max(2)).unwrap_or(libc::c_int::MAX);
    // SAFETY: mallopt only sets tunables of the allocator; called first thing in main, before
    // any other thread exists.
    #[allow(unsafe_code)]
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, arenas);
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
        libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub(crate) fn tune_malloc() {}

/// Gives the heap's free pages back to the system (glibc's `malloc_trim`): the heap's top is
/// kept past a run ([`TRIM_THRESHOLD`]) so that its pages are reused, but before a large
/// block is asked for in a heap full of small free holes (the input's text read again for
/// the write, after the stages freed what they held), those holes would stay resident beside
/// the new pages.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub(crate) fn return_free_pages() {
    // SAFETY: malloc_trim only returns free memory of the allocator's own to the system.
    #[allow(unsafe_code)]
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub(crate) fn return_free_pages() {}

/// Blocks from this size on are mappings of their own ([`tune_malloc`]): a 32 MiB input still
/// goes back to the system whole when it is freed.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MMAP_THRESHOLD: libc::c_int = 32 << 20;

/// The heap's free top is returned to the system from this size on ([`tune_malloc`]).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const TRIM_THRESHOLD: libc::c_int = 64 << 20;

/// An empty buffer of `capacity` bytes for a file to be read into whole: from 2 MiB on on huge
/// pages ([`with_huge_pages`]), its pages mapped in one call ([`populate`]).
pub(crate) fn input_buffer(capacity: usize) -> Result<Vec<u8>, std::collections::TryReserveError> {
    let mut buf = Vec::new();
    with_huge_pages(|| buf.try_reserve_exact(capacity))?;
    populate(&mut buf);
    Ok(buf)
}

/// Below this, a buffer's pages are few (and mostly mapped in the heap already).
const POPULATE_FROM: usize = 256 * 1024;

/// Maps the pages of `buf`'s spare capacity in one call (`MADV_POPULATE_WRITE`, Linux 5.14),
/// before something writes them: a large input read into a new buffer otherwise faults its
/// pages in one by one as `read` copies into them. On a 2-core VM a fault costs about 3 us:
/// the 800 pages of a 3.2 MB request body were a tenth of a `compress` turn. Nothing is
/// written; an older kernel (or another system) leaves the pages to fault in as before.
#[cfg(target_os = "linux")]
fn populate(buf: &mut Vec<u8>) {
    let spare = buf.spare_capacity_mut();
    if spare.len() < POPULATE_FROM {
        return;
    }
    // 4 KiB pages: where pages are larger the range is not aligned to them, madvise answers
    // EINVAL and the pages fault in as before.
    const PAGE: usize = 4096;
    let start = spare.as_mut_ptr() as usize;
    let first = start.next_multiple_of(PAGE);
    let end = (start + spare.len()) / PAGE * PAGE;
    if end <= first {
        return;
    }
    // SAFETY: [first, end) lies inside the vector's allocation (its spare capacity, rounded
    // inward to whole pages), which nothing else refers to. MADV_POPULATE_WRITE maps those
    // pages as a write would, without writing: what reads them sees what it would have seen.
    // An error (an older kernel's EINVAL) changes nothing and is ignored.
    #[allow(unsafe_code)]
    unsafe {
        libc::madvise(
            first as *mut libc::c_void,
            end - first,
            libc::MADV_POPULATE_WRITE,
        );
    }
}

#[cfg(not(target_os = "linux"))]
fn populate(_buf: &mut Vec<u8>) {}

/// The process's allocator: the system's (glibc's malloc, tuned by [`tune_malloc`]), except
/// that a large block asked for inside [`with_huge_pages`] starts on a 2 MiB boundary and is
/// backed by transparent huge pages where the kernel has them (`madvise` mode, the default of
/// most distributions).
///
/// Why: a page first touched costs about a microsecond on a 2-core VM (the kernel's fault and
/// zeroing), and a 3.2 MB input is 782 of them; a 2 MiB page is one fault and zeroes in about a
/// fifth of the time. Only the input buffer asks: it is written whole at once, so its huge
/// pages hold nothing unused, where a vector grown by doubling would keep whole 2 MiB pages
/// resident for its unused tail (with every block of 2 MiB or more aligned, peak RSS at 1M
/// tokens was 1.3 MB higher). A CLI turn at 1M tokens 0.952x the time (30 alternating pairs),
/// a first run 0.997x (16), peak RSS unchanged. The cost to watch: where the kernel compacts
/// memory for advised regions (`defrag` set to `madvise`, the usual default), a machine whose
/// memory is fragmented may stall that first touch while it finds a huge page;
/// [`input_buffer`] is the one place that asks.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[derive(Debug)]
pub(crate) struct Allocator;

/// A transparent huge page on x86-64 and most 64-bit Linux targets; where pages differ,
/// `madvise` refuses and the block keeps ordinary pages.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const HUGE_PAGE: usize = 2 << 20;

#[cfg(all(target_os = "linux", target_env = "gnu"))]
thread_local! {
    /// Set on this thread inside [`with_huge_pages`].
    static HUGE_PAGES: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f`, in which a block of 2 MiB or more that this thread allocates is aligned to and
/// backed by huge pages ([`Allocator`]). For a buffer that is filled whole right away.
fn with_huge_pages<T>(f: impl FnOnce() -> T) -> T {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        /// Clears the flag however `f` ends.
        struct Reset;
        impl Drop for Reset {
            fn drop(&mut self) {
                HUGE_PAGES.with(|h| h.set(false));
            }
        }
        HUGE_PAGES.with(|h| h.set(true));
        let _reset = Reset;
        f()
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    f()
}

// SAFETY: every block comes from glibc's malloc family (`memalign` or `System`, which calls
// `malloc`/`posix_memalign`), so `free` and `realloc`, which `System` calls for the alignments
// a layout of at most 2 MiB has, take any of them back. An aligned block is at least the
// layout's size and aligned to more than its alignment. `madvise` only changes how the
// block's own pages are backed, never their contents (they are not touched yet).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
unsafe impl std::alloc::GlobalAlloc for Allocator {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        let size = layout.size();
        if size >= HUGE_PAGE && layout.align() <= HUGE_PAGE && HUGE_PAGES.with(|h| h.get()) {
            // SAFETY: a power-of-two alignment and a non-zero size, as memalign asks.
            let block = unsafe { libc::memalign(HUGE_PAGE, size) }.cast::<u8>();
            if !block.is_null() {
                // SAFETY: the whole 2 MiB pages from the block's start lie inside the block.
                // A refusal (no huge pages here) leaves ordinary pages; it is ignored.
                unsafe {
                    libc::madvise(
                        block.cast(),
                        size / HUGE_PAGE * HUGE_PAGE,
                        libc::MADV_HUGEPAGE,
                    )
                };
            }
            return block;
        }
        // SAFETY: the caller's layout, as given.
        unsafe { std::alloc::System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        // SAFETY: `ptr` is a block of this allocator with this layout (see above).
        unsafe { std::alloc::System.dealloc(ptr, layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        // SAFETY: the caller's layout, as given.
        unsafe { std::alloc::System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as `dealloc`; glibc's realloc moves or grows any block of its own.
        unsafe { std::alloc::System.realloc(ptr, layout, new_size) }
    }
}

#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
mod tests {
    use super::{input_buffer, with_huge_pages, HUGE_PAGE, HUGE_PAGES};

    #[test]
    fn a_large_input_buffer_starts_on_a_huge_page() {
        let mut big = input_buffer(5 << 20).unwrap();
        assert!(big.is_empty() && big.capacity() >= 5 << 20);
        assert_eq!(big.as_ptr() as usize % HUGE_PAGE, 0);
        big.extend(std::iter::repeat_n(7u8, 5 << 20));
        // Grown past its block (glibc's realloc of an aligned block), then freed.
        big.extend(std::iter::repeat_n(9u8, 6 << 20));
        assert!(big[..5 << 20].iter().all(|&b| b == 7));
        assert!(big[5 << 20..].iter().all(|&b| b == 9));
        drop(big);
        // Only inside: the flag is cleared after, also when the closure panics.
        assert!(!HUGE_PAGES.with(|h| h.get()));
        let panicked = std::panic::catch_unwind(|| with_huge_pages(|| panic!("inside")));
        assert!(panicked.is_err());
        assert!(!HUGE_PAGES.with(|h| h.get()));
        // Small blocks inside are the system's as ever.
        let small: Vec<u64> = with_huge_pages(|| vec![1; 100]);
        assert_eq!(small.iter().sum::<u64>(), 100);
    }
}
