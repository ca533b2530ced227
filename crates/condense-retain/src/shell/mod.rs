//! Which files a shell command reads and writes, from a small POSIX-shell tokenizer.
//!
//! Recognised (only the common, unambiguous forms):
//!
//! - reads: `cat`/`less`/`more`/`nl`/`bat` arguments, `head`/`tail` files, `sed` without `-i`,
//!   `< file`;
//! - writes: `> f` and `&> f` (write), `>> f` and `&>> f` (append), `tee f...` (write; `-a`
//!   appends), `sed -i ... f` (edit), here-documents (`cat > f <<'EOF'`: the redirection writes
//!   `f`; the body's lines are not commands), `mv SRC... DST` (moves: `DST` written, each `SRC`
//!   deleted; `-t DIR` too), `cp SRC... DST` (`DST` written), `rm`/`unlink`/`rmdir f...`
//!   (deleted), `touch f...` (created), `mkdir [-p] d...` (created), `git mv`/`git rm` like
//!   `mv`/`rm` (`git rm --cached` leaves the file), and the script of `bash -c '...'`.
//!
//! Words with globs (`*?`), `$`, backquotes or braces are not exact paths and are skipped, as
//! are options and `/dev/...`, `/proc/...`. A leading `./` is removed. A `cd DIR` (or `pushd`)
//! earlier in the same command line is followed: relative paths after it are joined to `DIR`
//! (`cd /app && cat package.json` reads `/app/package.json`), so the raw path is a suffix of the
//! joined one.

mod tokenize;

use crate::artifacts::FileOp;
use tokenize::{tokenize, Tok};

/// How deep `bash -c '...'` scripts are followed.
const MAX_NESTING: usize = 3;

/// The file operations `command` performs, in order.
///
/// ```
/// use condense_retain::{shell, FileOp};
///
/// let ops = shell::file_ops("cd app && mv old.rs new.rs && cat > notes.md <<'EOF'\nrm x\nEOF");
/// assert_eq!(ops, vec![
///     ("app/old.rs".to_string(), FileOp::MoveFrom),
///     ("app/new.rs".to_string(), FileOp::MoveTo),
///     ("app/notes.md".to_string(), FileOp::Write),
/// ]);
/// ```
pub fn file_ops(command: &str) -> Vec<(String, FileOp)> {
    script_ops(command, 0)
}

/// The file operations of a command given as an argument vector (`["rm", "-f", "a.txt"]`), run
/// without a shell: no redirections, no separators.
pub fn argv_file_ops(argv: &[&str]) -> Vec<(String, FileOp)> {
    let mut ops = Vec::new();
    command_ops(argv, &mut ops, 0);
    ops
}

/// The simple commands of a command line, each as its words (quotes removed, here-document
/// bodies and comments skipped, redirections and their targets left out, leading `VAR=value`
/// assignments and `sudo`/`time`/`env`/`nohup`/`command`/`exec` wrappers dropped). What callers
/// build their own command checks on (e.g. "does this run a test suite").
pub fn commands(command: &str) -> Vec<Vec<String>> {
    tokenize(command)
        .split(|t| *t == Tok::Sep)
        .map(|cmd| {
            let words = words(cmd);
            strip_wrappers(&words)
                .iter()
                .map(|w| (*w).to_string())
                .collect::<Vec<_>>()
        })
        .filter(|words| !words.is_empty())
        .collect()
}

fn script_ops(command: &str, depth: usize) -> Vec<(String, FileOp)> {
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
        simple_command(cmd, &mut ops, depth);
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

/// The words of one command (operators and their targets dropped).
fn words(cmd: &[Tok]) -> Vec<&str> {
    let mut out = Vec::new();
    let mut it = cmd.iter();
    while let Some(t) = it.next() {
        match t {
            Tok::Word(w) => out.push(w.as_str()),
            Tok::Redir(_) => {
                it.next(); // the target
            }
            Tok::Sep => {}
        }
    }
    out
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

/// `a/./b/../c` → `a/c` (leading `..` of a relative path stays). A trailing `/` is kept.
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
    let mut joined = parts.join("/");
    if path.ends_with('/') && !joined.is_empty() {
        joined.push('/');
    }
    if absolute {
        format!("/{joined}")
    } else {
        joined
    }
}

fn basename(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

/// Drops `VAR=value` assignments and `sudo`/`time`/`env`/`nohup`/`command`/`exec` prefixes.
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

/// The word as an exact path (no globs, expansions, options, devices), `./` removed.
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

fn simple_command(toks: &[Tok], ops: &mut Vec<(String, FileOp)>, depth: usize) {
    let mut it = toks.iter();
    while let Some(t) = it.next() {
        if let Tok::Redir(op) = t {
            let Some(Tok::Word(target)) = it.next() else {
                continue;
            };
            let op = match *op {
                ">" | "&>" => FileOp::Write,
                ">>" | "&>>" => FileOp::Append,
                "<" => FileOp::Read,
                _ => continue, // here-docs, here-strings, fd duplication
            };
            if let Some(p) = as_path(target) {
                ops.push((p, op));
            }
        }
    }
    let words = words(toks);
    command_ops(&words, ops, depth);
}

/// The operations of one command's words (redirections already handled).
fn command_ops(words: &[&str], ops: &mut Vec<(String, FileOp)>, depth: usize) {
    let words = strip_wrappers(words);
    let Some((first, args)) = words.split_first() else {
        return;
    };
    let mut push_all = |paths: &[&str], op: FileOp| {
        for p in paths.iter().filter_map(|w| as_path(w)) {
            ops.push((p, op));
        }
    };
    match basename(first) {
        "cat" | "less" | "more" | "nl" | "bat" | "batcat" => {
            push_all(&operands(args, &[]), FileOp::Read)
        }
        "head" | "tail" => {
            let files = operands(args, &["-n", "-c", "--lines", "--bytes", "-s"]);
            push_all(&files, FileOp::Read);
        }
        "tee" => {
            let append = args.iter().any(|a| *a == "-a" || *a == "--append");
            let op = if append {
                FileOp::Append
            } else {
                FileOp::Write
            };
            push_all(&operands(args, &[]), op);
        }
        "sed" => sed(args, ops),
        "mv" => move_or_copy(args, true, ops),
        "cp" => move_or_copy(args, false, ops),
        "rm" | "unlink" | "rmdir" => push_all(&operands(args, &[]), FileOp::Delete),
        "touch" => {
            let files = operands(args, &["-d", "-r", "-t", "--date", "--reference"]);
            push_all(&files, FileOp::Touch);
        }
        "mkdir" => push_all(&operands(args, &["-m", "--mode"]), FileOp::Mkdir),
        "git" => match args.split_first() {
            Some((&"mv", rest)) => move_or_copy(rest, true, ops),
            Some((&"rm", rest)) if !rest.iter().any(|a| *a == "--cached" || *a == "-n") => {
                push_all(&operands(rest, &[]), FileOp::Delete)
            }
            _ => {}
        },
        "bash" | "sh" | "zsh" | "dash" | "ksh" if depth < MAX_NESTING => {
            // `bash -c SCRIPT` / `bash -lc SCRIPT`: the script's own operations.
            let flag = args
                .iter()
                .position(|a| a.starts_with('-') && !a.starts_with("--") && a.contains('c'));
            if let Some(script) = flag.and_then(|i| args.get(i + 1)) {
                ops.extend(script_ops(script, depth + 1));
            }
        }
        _ => {}
    }
}

/// `sed`: files edited in place with `-i`, read otherwise.
fn sed(args: &[&str], ops: &mut Vec<(String, FileOp)>) {
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
    let op = if in_place { FileOp::Edit } else { FileOp::Read };
    ops.extend(files.into_iter().filter_map(as_path).map(|p| (p, op)));
}

/// `mv`/`cp` (`git mv`): `SRC... DST` or `-t DIR SRC...`. Moves delete their sources.
fn move_or_copy(args: &[&str], moving: bool, ops: &mut Vec<(String, FileOp)>) {
    let mut target: Option<&str> = None;
    let mut operands: Vec<&str> = Vec::new();
    let mut i = 0;
    let mut options_done = false;
    while let Some(a) = args.get(i) {
        if options_done || !a.starts_with('-') || *a == "-" {
            operands.push(a);
        } else if *a == "--" {
            options_done = true;
        } else if *a == "-t" || *a == "--target-directory" {
            target = args.get(i + 1).copied();
            i += 1;
        } else if let Some(dir) = a.strip_prefix("--target-directory=") {
            target = Some(dir);
        } else if *a == "-S" || *a == "--suffix" {
            i += 1;
        }
        i += 1;
    }
    let (sources, dst) = match target {
        Some(dir) => (operands.as_slice(), dir),
        None => match operands.split_last() {
            Some((dst, sources)) if !sources.is_empty() => (sources, *dst),
            _ => return,
        },
    };
    if moving {
        ops.extend(
            sources
                .iter()
                .filter_map(|s| as_path(s))
                .map(|p| (p, FileOp::MoveFrom)),
        );
    }
    if let Some(p) = as_path(dst) {
        ops.push((
            p,
            if moving {
                FileOp::MoveTo
            } else {
                FileOp::CopyTo
            },
        ));
    }
}

/// The non-option arguments, skipping the values of the options in `with_value` (everything
/// after `--` is an operand).
fn operands<'a>(args: &[&'a str], with_value: &[&str]) -> Vec<&'a str> {
    let mut out = Vec::new();
    let mut i = 0;
    let mut options_done = false;
    while let Some(a) = args.get(i) {
        if options_done || !a.starts_with('-') || *a == "-" {
            out.push(*a);
        } else if *a == "--" {
            options_done = true;
        } else if with_value.contains(a) {
            i += 1;
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests;
