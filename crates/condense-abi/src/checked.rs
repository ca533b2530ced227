//! The layout checks a host has already passed, so that a plugin is not checked at every run.
//!
//! abi_stable checks, at every load, that the layout of every type a plugin's root module
//! reaches is compatible with the layout the host expects. That walk over the whole boundary
//! (the FFI conversation, the host services, the stage object) is most of what starting a run
//! costs: on the default pipeline's five plugins, about 11 M of the 16 M instructions that
//! compressing a tiny file takes. Yet its answer only depends on the two linked files: the
//! host's expected layout is a constant of the host binary, the plugin's a constant of the
//! library.
//!
//! So a pass is remembered under the pair of their **build ids** (the linker's hash of what it
//! linked, read by [`crate::libfile`]): the same pair means the same two layouts, and the check
//! would pass again. A rebuilt host or plugin has a new build id and is checked again; a file
//! without one (or a platform where it is not read: macOS, Windows) is checked every time. A
//! failed check is never remembered. The version check (the ABI version each side was built
//! against) still runs at every load, as does everything else loading does.
//!
//! abi_stable offers this use (`LibHeader::init_root_module_with_unchecked_layout`, "useful if
//! a user keeps a cache of which dynamic libraries have been checked for layout
//! compatibility"). The host keeps the record in a per-user cache file; its text is
//! [`CheckedLayouts::to_text`]: one pair's hash per line, the newest last, at most
//! [`CheckedLayouts::MAX`] of them.
//!
//! ```
//! use condense_abi::CheckedLayouts;
//! let mut checked = CheckedLayouts::parse("");
//! assert!(!checked.changed());
//! // ... Plugin::load_with(path, &mut checked) for each plugin ...
//! let text = checked.to_text();
//! assert_eq!(CheckedLayouts::parse(&text).len(), checked.len());
//! ```

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::OnceLock;
use twox_hash::XxHash3_128;

/// The first line of the record's text.
const HEADER: &str =
    "# condense: plugin libraries whose ABI layout this host passed (build ids hashed); safe to delete";

/// Which (host, library) pairs have passed abi_stable's layout check, and how many checks this
/// value has seen run.
#[derive(Debug, Default, Clone)]
pub struct CheckedLayouts {
    /// Oldest first (the order `to_text` keeps the newest by).
    pairs: Vec<u128>,
    /// The same pairs, to look up: a record read from a damaged or foreign file may be long.
    known: HashSet<u128>,
    changed: bool,
    checks: usize,
}

impl CheckedLayouts {
    /// The most pairs kept (the oldest are dropped): every rebuild of a plugin adds one.
    pub const MAX: usize = 256;

    /// The record written by [`CheckedLayouts::to_text`]; lines that are not a pair's hash
    /// (a damaged or foreign file) are ignored.
    pub fn parse(text: &str) -> CheckedLayouts {
        let mut checked = CheckedLayouts::default();
        for line in text.lines() {
            let line = line.trim();
            if line.len() == 32 {
                if let Ok(pair) = u128::from_str_radix(line, 16) {
                    checked.insert(pair);
                }
            }
        }
        checked
    }

    /// The record's text, at most [`CheckedLayouts::MAX`] pairs, the newest last.
    pub fn to_text(&self) -> String {
        let keep = &self.pairs[self.pairs.len().saturating_sub(Self::MAX)..];
        let mut text = String::with_capacity(HEADER.len() + 1 + keep.len() * 33);
        text.push_str(HEADER);
        text.push('\n');
        for pair in keep {
            text.push_str(&format!("{pair:032x}\n"));
        }
        text
    }

    /// Whether a pass was added since the record was read (then it is worth writing back).
    pub fn changed(&self) -> bool {
        self.changed
    }

    /// How many pairs are known.
    pub fn len(&self) -> usize {
        self.pairs.len()
    }

    /// Whether no pair is known.
    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    /// How many layout checks the loads given this value ran (the others were skipped).
    pub fn checks_run(&self) -> usize {
        self.checks
    }

    fn insert(&mut self, pair: u128) -> bool {
        let new = self.known.insert(pair);
        if new {
            self.pairs.push(pair);
        }
        new
    }

    pub(crate) fn contains(&self, pair: u128) -> bool {
        self.known.contains(&pair)
    }

    /// Notes that the check of `pair` ran, and passed when `passed`.
    pub(crate) fn ran(&mut self, pair: Option<u128>, passed: bool) {
        self.checks += 1;
        if let (Some(pair), true) = (pair, passed) {
            self.changed |= self.insert(pair);
        }
    }
}

/// The pair a library's layout check is remembered under: this host's build id and the
/// library's, or `None` when either has none.
pub(crate) fn pair(library_build_id: Option<&[u8]>) -> Option<u128> {
    Some(pair_of(host_build_id()?, library_build_id?))
}

fn pair_of(host: &[u8], library: &[u8]) -> u128 {
    let mut h = XxHash3_128::new();
    // Lengths first, so that no two different pairs feed the hash the same bytes.
    h.write(&(host.len() as u64).to_le_bytes());
    h.write(host);
    h.write(&(library.len() as u64).to_le_bytes());
    h.write(library);
    h.finish_128()
}

/// This process's executable's build id, read once. On Linux from `/proc/self/exe`, which
/// opens the very file this process runs even when a new build has been renamed over its path
/// since (reading that path would name the new build's layouts, not this process's).
fn host_build_id() -> Option<&'static [u8]> {
    static ID: OnceLock<Option<Vec<u8>>> = OnceLock::new();
    ID.get_or_init(|| {
        let exe = if cfg!(target_os = "linux") {
            PathBuf::from("/proc/self/exe")
        } else {
            std::env::current_exe().ok()?
        };
        crate::libfile::build_id(&exe)
    })
    .as_deref()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_record_reads_back_and_keeps_the_newest() {
        let mut checked = CheckedLayouts::default();
        for i in 0..(CheckedLayouts::MAX as u128 + 10) {
            checked.ran(Some(i + 1), true);
        }
        checked.ran(Some(999_999), false);
        assert!(checked.changed());
        assert_eq!(checked.checks_run(), CheckedLayouts::MAX + 11);
        let back = CheckedLayouts::parse(&checked.to_text());
        assert_eq!(back.len(), CheckedLayouts::MAX);
        assert!(!back.changed());
        // The oldest ten were dropped, the newest kept; a failed check was never recorded.
        assert!(!back.contains(10) && back.contains(11));
        assert!(back.contains(CheckedLayouts::MAX as u128 + 10));
        assert!(!back.contains(999_999));
    }

    #[test]
    fn damaged_lines_are_ignored_and_a_known_pass_changes_nothing() {
        let mut checked = CheckedLayouts::parse(&format!(
            "garbage\n{:032x}\nzz{}\n\n",
            7u128,
            "0".repeat(30)
        ));
        assert_eq!(checked.len(), 1);
        checked.ran(Some(7), true);
        checked.ran(None, true);
        assert!(!checked.changed(), "nothing new to write");
        assert_eq!(checked.checks_run(), 2);
    }

    #[test]
    fn a_pair_names_both_sides() {
        let a = pair_of(b"host", b"lib");
        assert_ne!(a, pair_of(b"host", b"lib2"));
        assert_ne!(a, pair_of(b"host2", b"lib"));
        // Not a concatenation: moving a byte from one side to the other is another pair.
        assert_ne!(pair_of(b"ab", b"c"), pair_of(b"a", b"bc"));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_test_binary_has_a_build_id() {
        // Rust's default linker set-up on Linux passes --build-id; the loader's saving
        // depends on it, so a toolchain that stops doing so should be noticed.
        let id = host_build_id().expect("the test executable has a GNU build id");
        assert!((8..=64).contains(&id.len()), "{} bytes", id.len());
        // Read through /proc/self/exe: the same file as the executable's path, while nothing
        // has replaced it.
        let by_path = crate::libfile::build_id(&std::env::current_exe().unwrap());
        assert_eq!(by_path.as_deref(), Some(id));
    }
}
