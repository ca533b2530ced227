//! Plugin loading at the edges: damaged libraries, paths that are not files, exit codes,
//! config mistakes said in words, the redaction order warning, and discovery by an installed
//! (copied) binary.

use crate::support::{bin, built_plugin, condense, condense_env, Run};
use std::path::{Path, PathBuf};
use std::process::Command;

fn write(path: &Path, text: &str) -> String {
    std::fs::write(path, text).unwrap();
    path.display().to_string()
}

fn small_input(dir: &Path) -> String {
    write(
        &dir.join("in.json"),
        r#"{"model":"gpt-4o","messages":[{"role":"user","content":"hello there"},{"role":"assistant","content":"hi"}]}"#,
    )
}

/// Runs another copy of the binary, with no plugin path and HOME / XDG_DATA_HOME as given.
fn run_copy(exe: &Path, args: &[&str], cwd: &Path, env: &[(&str, &Path)]) -> Run {
    let mut cmd = Command::new(exe);
    cmd.args(args)
        .current_dir(cwd)
        .env_remove("CONDENSE_PLUGIN_PATH")
        .env_remove("XDG_DATA_HOME");
    for (k, v) in env {
        cmd.env(k, v);
    }
    // A binary copied just now can be busy for a moment: another test thread's child, between
    // its fork and its exec, still holds the copy's write handle (ETXTBSY). Run it again then.
    let mut tries = 0;
    let out = loop {
        match cmd.output() {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy && tries < 100 => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            other => break other.expect("run the copied condense"),
        }
    };
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[test]
fn truncated_libraries_are_refused_in_one_line_not_with_sigbus() {
    let dir = tempfile::tempdir().unwrap();
    let input = small_input(dir.path());
    let whole = std::fs::read(built_plugin("snip")).unwrap();
    let lib = dir
        .path()
        .join(condense_host::discover::library_file_name("snip"));
    let folder = dir.path().display().to_string();
    // Found by name in a plugin folder, as the issue's crash was.
    let p = write(
        &dir.path().join("p.toml"),
        &format!("[plugins]\ndirs = [\"{folder}\"]\n[[stage]]\nplugin = \"snip\"\n"),
    );
    for cut in [
        100_000,
        400_000,
        800_000,
        1_200_000,
        1_600_000,
        whole.len() - 1,
    ] {
        std::fs::write(&lib, &whole[..cut]).unwrap();
        let expected = format!(
            "{}: not a usable plugin library: truncated at {cut} bytes",
            lib.display()
        );
        for args in [
            vec!["plugins"],
            vec!["pipeline", "check", &p],
            vec!["compress", &input, "--pipeline", &p],
        ] {
            let run = condense_env(&args, &[("CONDENSE_PLUGIN_PATH", &folder)], None);
            let line = run.one_line_failure(2);
            assert!(line.contains(&expected), "{args:?} at {cut}: {line}");
        }
    }
    // The whole library still loads.
    std::fs::write(&lib, &whole).unwrap();
    let run = condense(&["pipeline", "check", &p]);
    assert_eq!(run.code, 0, "{}", run.stderr);
}

#[test]
fn paths_that_are_not_library_files_say_what_they_are() {
    let dir = tempfile::tempdir().unwrap();
    let input = small_input(dir.path());
    let d = dir.path();
    std::fs::create_dir(d.join("folder")).unwrap();
    std::fs::write(d.join("notes.so"), "not a library at all").unwrap();
    let mut cases = vec![
        ("folder", "is a directory; name the library file in it"),
        ("missing.so", "does not exist"),
        (
            "notes.so",
            "not a usable plugin library: not a shared library (it is a text file)",
        ),
    ];
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(d.join("loop-b.so"), d.join("loop-a.so")).unwrap();
        std::os::unix::fs::symlink(d.join("loop-a.so"), d.join("loop-b.so")).unwrap();
        std::os::unix::fs::symlink(d.join("gone.so"), d.join("dangling.so")).unwrap();
        cases.push(("loop-a.so", "is a symbolic link loop"));
        cases.push(("dangling.so", "is a symbolic link to"));
    }
    for (plugin, words) in cases {
        let p = write(
            &d.join("p.toml"),
            &format!("[[stage]]\nplugin = \"./{plugin}\"\n"),
        );
        for args in [
            vec!["pipeline", "check", &p],
            vec!["compress", &input, "-p", &p],
        ] {
            let run = condense(&args);
            let line = run.one_line_failure(2);
            assert!(
                line.contains(words) && line.contains(plugin),
                "{plugin} {args:?}: {line}"
            );
        }
    }
}

#[test]
fn every_plugin_problem_in_pipeline_check_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    // A real shared library that is not a plugin, and one built for another ABI version.
    let forged = crate::support::test_plugin("test-faulty-forged");
    let not_plugin = std::env::current_exe().unwrap();
    let mut libs = vec![(forged.display().to_string(), "ABI version mismatch")];
    // The test executable is an ELF executable (or PIE): refused before loading either way.
    if cfg!(target_os = "linux") {
        libs.push((not_plugin.display().to_string(), "plugin library"));
    }
    for (path, words) in libs {
        let p = write(
            &dir.path().join("p.toml"),
            &format!("[[stage]]\nplugin = \"{path}\"\n"),
        );
        let run = condense(&["pipeline", "check", &p]);
        let line = run.one_line_failure(2);
        assert!(line.contains(words), "{line}");
    }
}

#[test]
fn stage_config_errors_name_the_key_the_type_and_the_place() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        &dir.path().join("p.toml"),
        "[[stage]]\nplugin = \"snip\"\n\n[stage.config]\nmin_duplicate_chars = 10\nprotect_recent_turns = \"x\"\n",
    );
    let run = condense(&["pipeline", "check", &p]);
    let line = run.one_line_failure(2);
    assert!(
        line.contains(&format!(
            "stage `snip`: config rejected: {p}:6:24: `[stage.config] protect_recent_turns` must be a whole number (0 or more), found \"x\""
        )),
        "{line}"
    );
    // Through a run the words are the same (the place needs the host's loader, see the report).
    let input = small_input(dir.path());
    let run = condense(&["compress", &input, "-p", &p]);
    let line = run.one_line_failure(2);
    assert!(
        line.contains(
            "`[stage.config] protect_recent_turns` must be a whole number (0 or more), found \"x\""
        ),
        "{line}"
    );
}

#[test]
fn toml_typos_name_the_mistake_not_duplicate_key() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "[[stage]]\nplugin = \"snip\"\n[stage.config]\nkeep_tail_bytes = 1\n\nplugin = \"microcompact\"\n[stage.config]\nx = 1\n",
            ":7:",
            "a second `[stage.config]` in the same `[[stage]]` (the first is on line 3)",
        ),
        (
            "[[stage]]\nplugin = \"snip\"\n[stage]\nplugin = \"microcompact\"\n",
            ":3:",
            "write `[[stage]]` (two brackets)",
        ),
        ("[[stages]]\nplugin = \"snip\"\n", ":1:", "did you mean `stage`?"),
        ("[[stage]]\nplugins = \"snip\"\n", ":2:", "did you mean `plugin`?"),
    ];
    for (text, place, words) in cases {
        let p = write(&dir.path().join("p.toml"), text);
        let run = condense(&["pipeline", "check", &p]);
        let line = run.one_line_failure(2);
        assert!(
            line.contains(place) && line.contains(words),
            "{text}: {line}"
        );
        assert!(!line.ends_with("duplicate key"), "{line}");
    }
}

#[test]
fn pipeline_show_takes_the_file_as_check_does() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        &dir.path().join("my.toml"),
        "[[stage]]\nname = \"only-snip\"\nplugin = \"snip\"\n",
    );
    let positional = condense(&["pipeline", "show", &p]);
    assert_eq!(positional.code, 0, "{}", positional.stderr);
    assert!(
        positional.stdout.contains("name = \"only-snip\""),
        "{}",
        positional.stdout
    );
    let flag = condense(&["pipeline", "show", "-p", &p]);
    assert_eq!(flag.stdout, positional.stdout);
}

#[test]
fn redacting_after_archiving_stages_warns_with_the_order() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        &dir.path().join("p.toml"),
        "[[stage]]\nplugin = \"snip\"\n[[stage]]\nname = \"redact\"\nplugin = \"redact-secrets\"\n",
    );
    let run = condense(&["pipeline", "check", &p]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let lines: Vec<&str> = run.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{}", run.stderr);
    assert!(
        lines[0].contains("warning:")
            && lines[0]
                .contains("`redact` redacts secrets after `snip` (stage order `snip` → `redact`)")
            && lines[0].contains("records/"),
        "{}",
        run.stderr
    );
    // First in the order: nothing to say.
    let p = write(
        &dir.path().join("p.toml"),
        "[[stage]]\nplugin = \"redact-secrets\"\n[[stage]]\nplugin = \"snip\"\n",
    );
    let run = condense(&["pipeline", "check", &p]);
    assert_eq!((run.code, run.stderr.as_str()), (0, ""));
}

/// `DIR/bin/condense` copied out of the build, with `plugins` in `DIR/lib/condense/plugins`
/// (or nowhere), the layout `cargo xtask install --prefix DIR` makes.
fn installed(root: &Path, plugins: &[&str]) -> PathBuf {
    let bin_dir = root.join("bin");
    std::fs::create_dir_all(&bin_dir).unwrap();
    let exe = bin_dir.join(bin().file_name().unwrap());
    std::fs::copy(bin(), &exe).unwrap();
    let lib_dir = root.join("lib/condense/plugins");
    for name in plugins {
        std::fs::create_dir_all(&lib_dir).unwrap();
        let lib = built_plugin(name);
        std::fs::copy(&lib, lib_dir.join(lib.file_name().unwrap())).unwrap();
    }
    exe
}

#[test]
fn an_installed_binary_finds_its_plugins_beside_it() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("prefix");
    let exe = installed(&root, &["snip"]);
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let env = [("HOME", home.as_path())];
    let run = run_copy(&exe, &["plugins"], dir.path(), &env);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let expected = root
        .join("lib/condense/plugins")
        .join(condense_host::discover::library_file_name("snip"));
    assert!(
        run.stdout.contains("snip") && run.stdout.contains(&expected.display().to_string()),
        "{}",
        run.stdout
    );
    let input = small_input(dir.path());
    let p = write(&dir.path().join("p.toml"), "[[stage]]\nplugin = \"snip\"\n");
    let run = run_copy(&exe, &["compress", &input, "-p", &p], dir.path(), &env);
    assert_eq!(run.code, 0, "{}", run.stderr);
}

#[test]
fn a_binary_without_plugins_says_how_to_get_them() {
    let dir = tempfile::tempdir().unwrap();
    let exe = installed(&dir.path().join("prefix"), &[]);
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let env = [("HOME", home.as_path())];
    let run = run_copy(&exe, &["plugins"], dir.path(), &env);
    let line = run.one_line_failure(2);
    assert!(
        line.contains("no plugins found") && line.contains("cargo xtask install"),
        "{line}"
    );
    let input = small_input(dir.path());
    let run = run_copy(&exe, &["compress", &input], dir.path(), &env);
    let line = run.one_line_failure(2);
    assert!(
        line.contains("plugin `tool-result-budget` not found")
            && line.contains("cargo xtask install"),
        "{line}"
    );
}

#[test]
fn the_per_user_data_folder_is_searched() {
    let dir = tempfile::tempdir().unwrap();
    let exe = installed(&dir.path().join("prefix"), &[]);
    let lib = built_plugin("snip");
    let file = lib.file_name().unwrap().to_owned();
    // XDG_DATA_HOME when set, ~/.local/share otherwise (Linux and the BSDs).
    let xdg = dir.path().join("data");
    let home = dir.path().join("home");
    for folder in [
        xdg.join("condense/plugins"),
        home.join(".local/share/condense/plugins"),
    ] {
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::copy(&lib, folder.join(&file)).unwrap();
    }
    if !cfg!(any(
        target_os = "linux",
        target_os = "freebsd",
        target_os = "openbsd",
        target_os = "netbsd"
    )) {
        return;
    }
    let run = run_copy(
        &exe,
        &["plugins"],
        dir.path(),
        &[("HOME", &home), ("XDG_DATA_HOME", &xdg)],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout
            .contains(&xdg.join("condense/plugins").display().to_string()),
        "{}",
        run.stdout
    );
    let run = run_copy(&exe, &["plugins"], dir.path(), &[("HOME", &home)]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains(
            &home
                .join(".local/share/condense/plugins")
                .display()
                .to_string()
        ),
        "{}",
        run.stdout
    );
}
