//! Whether a shell command runs a test suite, for the summary's `Last test run` item.

use condense_retain::shell;

/// Test runners recognised as the command itself (`pytest -x`) or among its first words
/// (`python -m pytest`, `npx jest`).
const RUNNERS: [&str; 12] = [
    "pytest",
    "jest",
    "vitest",
    "nextest",
    "ctest",
    "rspec",
    "phpunit",
    "tox",
    "mocha",
    "unittest",
    "gotestsum",
    "playwright",
];

/// Whether `command` runs a test suite (`cargo test`, `pytest`, `npm test`, `go test`, ...):
/// one of its simple commands is a runner, or has `test` (or `test:...`, or a runner) among its
/// first arguments and is not a command that merely reads (`cat`, `grep`, `git`, ...).
pub(crate) fn is_test_command(command: &str) -> bool {
    shell::commands(command).iter().any(|words| {
        let Some(first) = words.first() else {
            return false;
        };
        let base = first.rsplit('/').next().unwrap_or(first);
        if RUNNERS.contains(&base) {
            return true;
        }
        words
            .iter()
            .skip(1)
            .take(3)
            .any(|w| w == "test" || w.starts_with("test:") || RUNNERS.contains(&w.as_str()))
            && !matches!(
                base,
                "cat" | "head" | "tail" | "ls" | "grep" | "rg" | "find" | "git"
            )
    })
}

#[cfg(test)]
mod tests {
    use super::is_test_command;

    #[test]
    fn test_commands() {
        for yes in [
            "cargo test",
            "cd app && npm test",
            "npm run test:unit",
            "python -m pytest -x tests/",
            "RUST_LOG=debug cargo nextest run",
            "go test ./...",
            "npx jest auth",
            "sudo make test",
        ] {
            assert!(is_test_command(yes), "{yes}");
        }
        for no in [
            "cat tests/test_auth.py",
            "git log test",
            "grep -r test src",
            "ls tests",
            "cargo build",
        ] {
            assert!(!is_test_command(no), "{no}");
        }
    }
}
