//! How the process asks the operating system for memory: the allocator's arenas, and the
//! pages of a large buffer mapped in one call rather than one fault at a time.

/// Caps glibc's malloc at one arena per core, at least two (its default is eight per core).
/// Each thread that allocates while another holds an arena gets one of its own, and what a
/// thread frees stays in its arena: on 2 cores the threads that parse a large input left about
/// 8 MB more resident at the peak of a 4M-token run (94.5 MB against 86.5 MB with two arenas),
/// for no speed (0.999x-1.001x in alternating pairs; one arena was 4-9% slower). One per core
/// keeps the parallel counting and `serve`'s workers from queueing on a lock on larger machines.
/// Set before any thread starts. Other C libraries have their own policies and are left alone.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub(crate) fn limit_malloc_arenas() {
    let cores = std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get);
    let arenas = libc::c_int::try_from(cores.max(2)).unwrap_or(libc::c_int::MAX);
    // SAFETY: mallopt only sets a tunable of the allocator; called first thing in main, before
    // any other thread exists.
    #[allow(unsafe_code)]
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, arenas);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub(crate) fn limit_malloc_arenas() {}

/// Below this, a buffer's pages are few (and mostly mapped in the heap already).
const POPULATE_FROM: usize = 256 * 1024;

/// Maps the pages of `buf`'s spare capacity in one call (`MADV_POPULATE_WRITE`, Linux 5.14),
/// before something writes them: a large input read into a new buffer otherwise faults its
/// pages in one by one as `read` copies into them. On a 2-core VM a fault costs about 3 us:
/// the 800 pages of a 3.2 MB request body were a tenth of a `compress` turn. Nothing is
/// written; an older kernel (or another system) leaves the pages to fault in as before.
#[cfg(target_os = "linux")]
pub(crate) fn populate(buf: &mut Vec<u8>) {
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
pub(crate) fn populate(_buf: &mut Vec<u8>) {}
