//! Which files a shell command reads and writes, from a small POSIX-shell tokenizer.
//!
//! Only the common, unambiguous forms are recognised: `cat`/`head`/`tail`/`less`/`nl` and
//! `sed -n` read their file arguments, `< file` reads, `sed -i` edits in place, `tee` writes
//! (`tee -a` appends), `> file` writes and `>> file` appends. Here-document bodies are skipped
//! (a `cat > f <<'EOF'` writes `f`; the lines of the body are not commands). Words with globs,
//! expansions or command substitutions are not exact paths and are left out.

use super::files::FileOp;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Word(String),
    /// A command separator: `|`, `||`, `&&`, `;`, `&`, newline, parentheses.
    Sep,
    /// A redirection operator: `>`, `>>`, `<`, `<<`, `<<<`, `>&`, `&>`, `&>>`, `<&`, `<>`.
    Redir(&'static str),
}

/// The file reads and writes `command` performs, in order.
///
/// A `cd DIR` earlier in the same command line is followed: relative paths after it are
/// joined to `DIR` (`cd /app && cat package.json` reads `/app/package.json`).
pub(crate) fn file_ops(command: &str) -> Vec<(String, FileOp)> {
    let mut ops = Vec::new();
    let mut cwd: Option<String> = None;
    for cmd in tokenize(command).split(|t| *t == Tok::Sep) {
        let start = ops.len();
        if let Some(dir) = cd_target(cmd) {
            cwd = dir.map(|d| match &cwd {
                Some(base) if !d.starts_with('/') => normalize(&format!("{base}/{d}")),
                _ => normalize(&d),
            });
            continue;
        }
        simple_command(cmd, &mut ops);
        if let Some(base) = &cwd {
            for (path, _) in &mut ops[start..] {
                if !path.starts_with('/') && !path.starts_with('~') {
                    *path = normalize(&format!("{base}/{path}"));
                }
            }
        }
    }
    ops
}

/// The words of one command (its separators and operators dropped).
fn words(cmd: &[Tok]) -> Vec<&str> {
    cmd.iter()
        .filter_map(|t| match t {
            Tok::Word(w) => Some(w.as_str()),
            _ => None,
        })
        .collect()
}

/// For a `cd` command: `Some(Some(dir))`, or `Some(None)` when the directory is unknown
/// (`cd`, `cd -`, `cd ~`, `cd $X`).
fn cd_target(cmd: &[Tok]) -> Option<Option<String>> {
    match words(cmd).as_slice() {
        ["cd" | "pushd"] => Some(None),
        ["cd" | "pushd", dir] => Some(as_path(dir).filter(|d| !d.starts_with('~'))),
        _ => None,
    }
}

/// `a/./b/../c` → `a/c` (leading `..` of a relative path stays).
fn normalize(path: &str) -> String {
    let absolute = path.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." if parts.last().is_some_and(|p| *p != "..") => {
                parts.pop();
            }
            ".." if absolute => {}
            p => parts.push(p),
        }
    }
    let joined = parts.join("/");
    if absolute {
        format!("/{joined}")
    } else {
        joined
    }
}

/// Whether `command` runs a test suite (`cargo test`, `pytest`, `npm test`, `go test`, ...).
pub(crate) fn is_test_command(command: &str) -> bool {
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
    tokenize(command).split(|t| *t == Tok::Sep).any(|cmd| {
        let words = words(cmd);
        let words = strip_wrappers(&words);
        let Some(first) = words.first() else {
            return false;
        };
        let base = basename(first);
        if RUNNERS.contains(&base) {
            return true;
        }
        // `cargo test`, `go test`, `npm test`, `npm run test:unit`, `make test`, `python -m pytest`.
        words
            .iter()
            .skip(1)
            .take(3)
            .any(|w| *w == "test" || w.starts_with("test:") || RUNNERS.contains(w))
            && !matches!(
                base,
                "cat" | "head" | "tail" | "ls" | "grep" | "rg" | "find" | "git"
            )
    })
}

fn basename(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

/// Drops `VAR=value` assignments and `sudo`/`time`/`env`/`nohup`/`command` prefixes.
fn strip_wrappers<'a, 'b>(words: &'b [&'a str]) -> &'b [&'a str] {
    let mut i = 0;
    while let Some(w) = words.get(i) {
        let assignment = w.split_once('=').is_some_and(|(name, _)| {
            !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        });
        if assignment || matches!(*w, "sudo" | "time" | "env" | "nohup" | "command" | "exec") {
            i += 1;
        } else {
            break;
        }
    }
    &words[i..]
}

/// Whether a word is an exact path (no globs, expansions, options).
fn as_path(word: &str) -> Option<String> {
    let w = word.strip_prefix("./").unwrap_or(word);
    let bad = w.is_empty()
        || w.starts_with('-')
        || w.starts_with("/dev/")
        || w.starts_with("/proc/")
        || w.chars()
            .any(|c| matches!(c, '*' | '?' | '$' | '`' | '{' | '}' | '\n' | '\0'))
        || w.chars().all(|c| c.is_ascii_digit());
    (!bad).then(|| w.to_string())
}

fn simple_command(toks: &[Tok], ops: &mut Vec<(String, FileOp)>) {
    let mut words: Vec<&str> = Vec::new();
    let mut it = toks.iter();
    while let Some(t) = it.next() {
        match t {
            Tok::Word(w) => words.push(w),
            Tok::Redir(op) => {
                let target = match it.next() {
                    Some(Tok::Word(w)) => w.as_str(),
                    _ => continue,
                };
                let op = match *op {
                    ">" | "&>" => FileOp::Write,
                    ">>" | "&>>" => FileOp::Edit,
                    "<" => FileOp::Read,
                    _ => continue, // here-docs, here-strings, fd duplication
                };
                if let Some(p) = as_path(target) {
                    ops.push((p, op));
                }
            }
            Tok::Sep => {}
        }
    }
    let words = strip_wrappers(&words);
    let Some((first, args)) = words.split_first() else {
        return;
    };
    let mut push_all = |paths: &[&str], op: FileOp| {
        for p in paths.iter().filter_map(|w| as_path(w)) {
            ops.push((p, op));
        }
    };
    match basename(first) {
        "cat" | "less" | "more" | "nl" | "bat" | "batcat" => push_all(args, FileOp::Read),
        "head" | "tail" => {
            let files = operands(args, &["-n", "-c", "--lines", "--bytes", "-s"]);
            push_all(&files, FileOp::Read);
        }
        "tee" => {
            let append = args.iter().any(|a| *a == "-a" || *a == "--append");
            let op = if append { FileOp::Edit } else { FileOp::Write };
            push_all(&operands(args, &[]), op);
        }
        "sed" => {
            let mut in_place = false;
            let mut script_given = false;
            let mut files = Vec::new();
            let mut i = 0;
            while let Some(a) = args.get(i) {
                if *a == "-e" || *a == "-f" || *a == "--expression" || *a == "--file" {
                    script_given = true;
                    i += 1;
                } else if a.starts_with("--expression=") || a.starts_with("--file=") {
                    script_given = true;
                } else if *a == "--in-place" || a.starts_with("--in-place=") {
                    in_place = true;
                } else if a.starts_with('-') && a.len() > 1 && !a.starts_with("--") {
                    // A flag cluster: `-n`, `-i`, `-i.bak`, `-ni`, `-ne SCRIPT`.
                    let flags = &a[1..];
                    if flags.starts_with('i') {
                        in_place = true;
                    } else {
                        in_place |= flags.contains('i');
                        if flags.ends_with('e') || flags.ends_with('f') {
                            script_given = true;
                            i += 1;
                        }
                    }
                } else if !script_given {
                    script_given = true; // the script itself
                } else {
                    files.push(*a);
                }
                i += 1;
            }
            push_all(&files, if in_place { FileOp::Edit } else { FileOp::Read });
        }
        _ => {}
    }
}

/// The non-option arguments, skipping the values of the options in `with_value`.
fn operands<'a>(args: &[&'a str], with_value: &[&str]) -> Vec<&'a str> {
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(a) = args.get(i) {
        if with_value.contains(a) {
            i += 1;
        } else if !a.starts_with('-') || *a == "-" {
            out.push(*a);
        }
        i += 1;
    }
    out
}

/// Splits a command line into words, separators and redirections. Quotes are removed,
/// `$(...)` and backquotes stay inside their word, comments and here-document bodies are dropped.
fn tokenize(src: &str) -> Vec<Tok> {
    let chars: Vec<char> = src.chars().collect();
    let mut toks = Vec::new();
    let mut word = String::new();
    let mut quoted = false; // the current word had quotes (so `''` is a word)
    let mut heredocs: Vec<String> = Vec::new();
    let mut want_delim = false;
    let mut i = 0;

    macro_rules! flush {
        () => {
            if !word.is_empty() || quoted {
                let w = std::mem::take(&mut word);
                if want_delim {
                    heredocs.push(w.clone());
                    want_delim = false;
                }
                toks.push(Tok::Word(w));
                quoted = false;
            }
        };
    }

    while let Some(&c) = chars.get(i) {
        let next = chars.get(i + 1).copied();
        match c {
            '\\' => {
                match next {
                    Some('\n') | None => {}
                    Some(n) => word.push(n),
                }
                i += 2;
                continue;
            }
            '\'' => {
                quoted = true;
                i += 1;
                while let Some(&q) = chars.get(i) {
                    i += 1;
                    if q == '\'' {
                        break;
                    }
                    word.push(q);
                }
                continue;
            }
            '"' => {
                quoted = true;
                i += 1;
                while let Some(&q) = chars.get(i) {
                    i += 1;
                    match q {
                        '"' => break,
                        '\\' => {
                            if let Some(&e) = chars.get(i) {
                                if !matches!(e, '"' | '\\' | '$' | '`') {
                                    word.push('\\');
                                }
                                word.push(e);
                                i += 1;
                            }
                        }
                        _ => word.push(q),
                    }
                }
                continue;
            }
            '$' if next == Some('(') => {
                // Command substitution: kept in the word, balanced.
                let mut depth = 0;
                while let Some(&q) = chars.get(i) {
                    word.push(q);
                    i += 1;
                    match q {
                        '(' => depth += 1,
                        ')' => {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                continue;
            }
            '`' => {
                word.push(c);
                i += 1;
                while let Some(&q) = chars.get(i) {
                    word.push(q);
                    i += 1;
                    if q == '`' {
                        break;
                    }
                }
                continue;
            }
            '#' if word.is_empty() && !quoted => {
                while chars.get(i).is_some_and(|&q| q != '\n') {
                    i += 1;
                }
                continue;
            }
            ' ' | '\t' | '\r' => flush!(),
            '\n' => {
                flush!();
                toks.push(Tok::Sep);
                i += 1;
                // Skip the bodies of the here-documents opened on this line.
                for delim in std::mem::take(&mut heredocs) {
                    while i < chars.len() {
                        let end = chars[i..]
                            .iter()
                            .position(|&q| q == '\n')
                            .map_or(chars.len(), |p| i + p);
                        let line: String = chars[i..end].iter().collect();
                        i = end + 1;
                        if line.trim() == delim {
                            break;
                        }
                    }
                }
                continue;
            }
            ';' | '(' | ')' => {
                flush!();
                toks.push(Tok::Sep);
            }
            '|' => {
                flush!();
                toks.push(Tok::Sep);
                if matches!(next, Some('|') | Some('&')) {
                    i += 1;
                }
            }
            '&' => {
                flush!();
                if next == Some('>') {
                    let append = chars.get(i + 2) == Some(&'>');
                    toks.push(Tok::Redir(if append { "&>>" } else { "&>" }));
                    i += if append { 3 } else { 2 };
                    continue;
                }
                toks.push(Tok::Sep);
                if next == Some('&') {
                    i += 1;
                }
            }
            '>' | '<' => {
                // A word of digits right before is a file descriptor (`2>`), not an argument.
                if !quoted && !word.is_empty() && word.chars().all(|d| d.is_ascii_digit()) {
                    word.clear();
                }
                flush!();
                let (op, len) = match (c, next, chars.get(i + 2).copied()) {
                    ('>', Some('>'), _) => (">>", 2),
                    ('>', Some('&'), _) => (">&", 2),
                    ('>', Some('|'), _) => (">", 2),
                    ('>', _, _) => (">", 1),
                    ('<', Some('<'), Some('<')) => ("<<<", 3),
                    ('<', Some('<'), Some('-')) => ("<<", 3),
                    ('<', Some('<'), _) => ("<<", 2),
                    ('<', Some('&'), _) => ("<&", 2),
                    ('<', Some('>'), _) => ("<>", 2),
                    _ => ("<", 1),
                };
                if op == "<<" {
                    want_delim = true;
                }
                toks.push(Tok::Redir(op));
                i += len;
                continue;
            }
            _ => word.push(c),
        }
        i += 1;
    }
    if !word.is_empty() || quoted {
        toks.push(Tok::Word(word));
    }
    toks
}

#[cfg(test)]
mod tests {
    use super::*;
    use FileOp::*;

    fn ops(cmd: &str) -> Vec<(String, FileOp)> {
        file_ops(cmd)
    }

    fn p(s: &str, op: FileOp) -> (String, FileOp) {
        (s.to_string(), op)
    }

    #[test]
    fn reads() {
        assert_eq!(ops("cat src/a.rs"), vec![p("src/a.rs", Read)]);
        assert_eq!(ops("head -n 20 ./b.txt | grep x"), vec![p("b.txt", Read)]);
        assert_eq!(ops("tail -f log.txt"), vec![p("log.txt", Read)]);
        assert_eq!(
            ops("sed -n '1,20p' 'my file.rs'"),
            vec![p("my file.rs", Read)]
        );
        assert_eq!(ops("wc -l < data.csv"), vec![p("data.csv", Read)]);
        assert_eq!(ops("cd x && cat *.rs"), vec![]);
        assert_eq!(ops("cat $HOME/x"), vec![]);
    }

    #[test]
    fn cd_is_followed_within_the_command() {
        assert_eq!(
            ops("cd /app && cat package.json ../etc/x /abs/y; cd src && sed -i 's/a/b/' ./lib.rs"),
            vec![
                p("/app/package.json", Read),
                p("/etc/x", Read),
                p("/abs/y", Read),
                p("/app/src/lib.rs", Edit)
            ]
        );
        assert_eq!(ops("cd ~ && cat a"), vec![p("a", Read)]);
    }

    #[test]
    fn writes() {
        assert_eq!(ops("sed -i 's/a/b/' src/c.rs"), vec![p("src/c.rs", Edit)]);
        assert_eq!(ops("sed -i.bak -e 's/a/b/' x.py"), vec![p("x.py", Edit)]);
        assert_eq!(ops("echo hi | tee out.txt"), vec![p("out.txt", Write)]);
        assert_eq!(ops("echo hi | tee -a out.txt"), vec![p("out.txt", Edit)]);
        assert_eq!(ops("echo 'a > b' > f.txt"), vec![p("f.txt", Write)]);
        assert_eq!(ops("echo x >> log.md 2>/dev/null"), vec![p("log.md", Edit)]);
        assert_eq!(ops("cargo test 2> err.txt"), vec![p("err.txt", Write)]);
        assert_eq!(ops("ls >&2"), vec![]);
    }

    #[test]
    fn heredoc_bodies_are_not_commands() {
        let cmd = "cat > notes.md <<'EOF'\ncat secret.txt\n> other.txt\nEOF\ncat after.txt";
        assert_eq!(ops(cmd), vec![p("notes.md", Write), p("after.txt", Read)]);
    }

    #[test]
    fn test_commands() {
        for c in [
            "cargo test -p foo",
            "pytest -x tests/",
            "npm test",
            "npm run test:unit",
            "cd app && RUST_LOG=1 cargo nextest run",
            "python -m pytest",
            "go test ./...",
        ] {
            assert!(is_test_command(c), "{c}");
        }
        for c in [
            "cat tests/test_a.py",
            "ls test",
            "cargo build",
            "git log -- test",
        ] {
            assert!(!is_test_command(c), "{c}");
        }
    }
}
