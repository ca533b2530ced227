//! How the process asks the operating system for memory: the allocator's arenas, and the
//! pages of a large buffer mapped in one call rather than one fault at a time.

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

/// Blocks from this size on are mappings of their own ([`tune_malloc`]): a 32 MiB input still
/// goes back to the system whole when it is freed.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MMAP_THRESHOLD: libc::c_int = 32 << 20;

/// The heap's free top is returned to the system from this size on ([`tune_malloc`]).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const TRIM_THRESHOLD: libc::c_int = 64 << 20;

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
