//! The shipped plugins embedded in an installed binary (see `build.rs`).
//!
//! A binary from `cargo install --path crates/condense` carries the shipped plugins. The first
//! time it runs, it unpacks them into the per-user data folder, under a name that changes with
//! every embedded byte (`~/.local/share/condense/bundled/<version>-<hash>/`), so two installed
//! versions never load each other's plugins; later runs only check that the folder is there.
//! Binaries built in the workspace embed nothing, and this does nothing.

use std::path::{Path, PathBuf};

include!(concat!(env!("OUT_DIR"), "/bundled_plugins.rs"));

/// Unpacks the bundled plugins (once) and points discovery at them. A failure is a warning:
/// discovery then reports what it could not find, with the usual advice.
pub fn activate() {
    if BUNDLED.is_empty() {
        return;
    }
    let Some(base) = condense_host::discover::user_plugin_dir()
        .and_then(|plugins| plugins.parent().map(|data| data.join("bundled")))
    else {
        return;
    };
    match unpack(&base, BUNDLE_ID, BUNDLED) {
        Ok(dir) => condense_host::discover::set_bundled_dir(dir),
        Err(e) => crate::term::warn(&format!(
            "cannot unpack the bundled plugins into {}: {e}",
            base.display()
        )),
    }
}

/// Writes `libs` into `base/id/` unless a complete copy is there; returns that folder.
///
/// The files go to a temporary sibling folder first, which is renamed into place: a run that
/// is killed half-way, or two first runs at once, never leave a half-filled folder that the
/// next run would trust.
fn unpack(base: &Path, id: &str, libs: &[(&str, &[u8])]) -> std::io::Result<PathBuf> {
    let dir = base.join(id);
    if dir.is_dir() {
        return Ok(dir);
    }
    std::fs::create_dir_all(base)?;
    let tmp = base.join(format!(".tmp-{id}-{}", std::process::id()));
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp)?;
    }
    std::fs::create_dir(&tmp)?;
    for (name, bytes) in libs {
        std::fs::write(tmp.join(name), bytes)?;
    }
    match std::fs::rename(&tmp, &dir) {
        Ok(()) => Ok(dir),
        // Another first run got there first: its copy is complete (renamed into place whole).
        Err(_) if dir.is_dir() => {
            let _ = std::fs::remove_dir_all(&tmp);
            Ok(dir)
        }
        Err(e) => {
            let _ = std::fs::remove_dir_all(&tmp);
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unpacks_once_into_a_folder_named_by_the_bundle() {
        let base = tempfile::tempdir().unwrap();
        let libs: &[(&str, &[u8])] = &[("liba.so", b"first"), ("libb.so", b"second")];
        let dir = unpack(base.path(), "0.1.0-00ff", libs).unwrap();
        assert_eq!(dir, base.path().join("0.1.0-00ff"));
        assert_eq!(std::fs::read(dir.join("liba.so")).unwrap(), b"first");
        assert_eq!(std::fs::read(dir.join("libb.so")).unwrap(), b"second");
        // A second run trusts the complete folder and writes nothing.
        std::fs::write(dir.join("liba.so"), b"kept").unwrap();
        unpack(base.path(), "0.1.0-00ff", libs).unwrap();
        assert_eq!(std::fs::read(dir.join("liba.so")).unwrap(), b"kept");
        // No temporary folder is left behind.
        let names: Vec<_> = std::fs::read_dir(base.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("0.1.0-00ff")]);
    }

    #[test]
    fn a_left_over_temporary_folder_is_replaced() {
        let base = tempfile::tempdir().unwrap();
        let stale = base.path().join(format!(".tmp-id-{}", std::process::id()));
        std::fs::create_dir(&stale).unwrap();
        std::fs::write(stale.join("half.so"), b"x").unwrap();
        let dir = unpack(base.path(), "id", &[("liba.so", b"a")]).unwrap();
        assert!(!dir.join("half.so").exists());
        assert!(dir.join("liba.so").is_file());
    }

    #[test]
    fn a_workspace_build_embeds_nothing() {
        // Tests build inside the workspace's target folder: no bundle, so discovery is the
        // checkout's (target/plugins) and nothing is unpacked into the user's folder.
        assert!(BUNDLED.is_empty());
    }
}
