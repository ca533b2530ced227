//! What a shell command writes: the redirections and commands the spec names, read from the
//! words and operators of the tokenizer (`lex`: quotes, escapes, here-documents, command
//! substitution).
//!
//! Written: `> f`, `>> f`, `&> f` (with or without a file descriptor in front), `tee [-a] f...`,
//! `sed -i ... f...`, `cat > f <<EOF`, `mv SRC... DST` (the sources are deleted, the destination
//! written), `cp SRC... DST` (the destination), `rm f...`, `touch f...`, `mkdir [-p] d...`.
//! Words holding globs (`*`, `?`), `$`, backquotes or braces are not exact paths and are
//! skipped; here-document bodies are data, not commands.
//!
//! ```
//! use condense_eval::probes::shell::writes;
//!
//! let script = "cd /repo && cat > notes.md <<'EOF'\nrm -rf not-a-command\nEOF\nmv a.txt b.txt 2>&1";
//! assert_eq!(writes(script), ["notes.md", "a.txt", "b.txt"]);
//! assert!(writes("rm -f *.o $OUT build/${NAME}").is_empty());
//! ```

use super::lex::{tokenize, Tok, Word};

/// The paths a shell script writes, in order (not normalised, not deduplicated).
pub fn writes(script: &str) -> Vec<String> {
    let toks = tokenize(script);
    let mut out = Vec::new();
    let mut words: Vec<Word> = Vec::new();
    let mut it = toks.into_iter().peekable();
    while let Some(tok) = it.next() {
        match tok {
            Tok::Word(w) => words.push(w),
            Tok::Sep => {
                out.extend(simple_command(&words));
                words.clear();
            }
            Tok::Write => {
                if let Some(Tok::Word(w)) = it.peek() {
                    if w.exact() {
                        out.push(w.0.clone());
                    }
                    it.next();
                }
            }
            Tok::Other | Tok::HereDoc => {
                if let Some(Tok::Word(_)) = it.peek() {
                    it.next();
                }
            }
            Tok::Dup => {}
        }
    }
    out.extend(simple_command(&words));
    out
}

/// The paths one command (already split into words, as an argv array) writes.
pub fn command_writes(argv: &[String]) -> Vec<String> {
    let words: Vec<Word> = argv.iter().map(|a| Word(a.clone())).collect();
    simple_command(&words)
}

/// Words that open a command without being it.
const KEYWORDS: &[&str] = &[
    "if", "then", "else", "elif", "do", "while", "until", "!", "time", "nohup", "command", "exec",
    "builtin",
];

fn is_assignment(w: &str) -> bool {
    match w.split_once('=') {
        Some((name, _)) => {
            !name.is_empty()
                && !name.starts_with(|c: char| c.is_ascii_digit())
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        }
        None => false,
    }
}

/// The command a simple command runs (keywords, assignments, `sudo`/`env` skipped) and its
/// arguments.
fn split_command(words: &[Word]) -> Option<(&str, &[Word])> {
    let mut i = 0;
    while i < words.len() {
        let w = words[i].0.as_str();
        if KEYWORDS.contains(&w) || is_assignment(w) {
            i += 1;
        } else if w == "sudo" || w == "env" {
            i += 1;
            while i < words.len() && (words[i].0.starts_with('-') || is_assignment(&words[i].0)) {
                // sudo -u USER / -g GROUP take a value.
                let takes = w == "sudo" && matches!(words[i].0.as_str(), "-u" | "-g");
                i += if takes { 2 } else { 1 };
            }
        } else {
            let name = w.rsplit('/').next().unwrap_or(w);
            return Some((name, &words[i + 1..]));
        }
    }
    None
}

/// Positional arguments after options. `takes_value` says which short options (and long ones
/// without `=`) consume the next word; the options' values are returned separately.
struct Args<'a> {
    positional: Vec<&'a Word>,
    /// (option, value) for options that take one.
    values: Vec<(String, String)>,
    /// Every option seen, values excluded.
    flags: Vec<String>,
}

fn parse_args<'a>(args: &'a [Word], short_values: &[char], long_values: &[&str]) -> Args<'a> {
    let mut out = Args {
        positional: Vec::new(),
        values: Vec::new(),
        flags: Vec::new(),
    };
    let mut i = 0;
    let mut ended = false;
    while i < args.len() {
        let a = &args[i].0;
        i += 1;
        if ended || !a.starts_with('-') || a == "-" {
            out.positional.push(&args[i - 1]);
            continue;
        }
        if a == "--" {
            ended = true;
            continue;
        }
        if let Some(long) = a.strip_prefix("--") {
            match long.split_once('=') {
                Some((k, v)) => out.values.push((k.to_string(), v.to_string())),
                None if long_values.contains(&long) => {
                    let v = args.get(i).map(|w| w.0.clone()).unwrap_or_default();
                    i += 1;
                    out.values.push((long.to_string(), v));
                }
                None => out.flags.push(long.to_string()),
            }
            continue;
        }
        let cluster: Vec<char> = a.chars().skip(1).collect();
        for (j, c) in cluster.iter().enumerate() {
            if short_values.contains(c) {
                let rest: String = cluster[j + 1..].iter().collect();
                let v = if rest.is_empty() {
                    let v = args.get(i).map(|w| w.0.clone()).unwrap_or_default();
                    i += 1;
                    v
                } else {
                    rest
                };
                out.values.push((c.to_string(), v));
                break;
            }
            out.flags.push(c.to_string());
        }
    }
    out
}

fn exact_paths<'a>(words: impl IntoIterator<Item = &'a Word>) -> Vec<String> {
    words
        .into_iter()
        .filter(|w| w.exact())
        .map(|w| w.0.clone())
        .collect()
}

/// What one simple command writes.
fn simple_command(words: &[Word]) -> Vec<String> {
    let Some((name, args)) = split_command(words) else {
        return Vec::new();
    };
    match name {
        "tee" => exact_paths(parse_args(args, &[], &[]).positional),
        "rm" => exact_paths(parse_args(args, &[], &[]).positional),
        "mkdir" => exact_paths(parse_args(args, &['m'], &["mode"]).positional),
        "touch" => {
            exact_paths(parse_args(args, &['d', 't', 'r'], &["date", "reference"]).positional)
        }
        "mv" | "cp" => {
            let a = parse_args(args, &['t', 'S'], &["target-directory", "suffix"]);
            let target = a
                .values
                .iter()
                .find(|(k, _)| k == "t" || k == "target-directory")
                .map(|(_, v)| Word(v.clone()));
            match (name, target) {
                ("mv", Some(dir)) => {
                    let mut p = exact_paths(a.positional);
                    p.extend(exact_paths([&dir]));
                    p
                }
                ("cp", Some(dir)) => exact_paths([&dir]),
                ("mv", None) if a.positional.len() >= 2 => exact_paths(a.positional),
                (_, None) if a.positional.len() >= 2 => exact_paths(a.positional.last().copied()),
                _ => Vec::new(),
            }
        }
        "sed" => sed_in_place(args),
        _ => Vec::new(),
    }
}

/// `sed -i[SUFFIX] [-e SCRIPT | -f FILE]... [SCRIPT] FILE...`: the files, when in place.
fn sed_in_place(args: &[Word]) -> Vec<String> {
    let mut in_place = false;
    let mut has_script = false;
    let mut positional: Vec<&Word> = Vec::new();
    let mut i = 0;
    let mut ended = false;
    while i < args.len() {
        let a = args[i].0.as_str();
        i += 1;
        if ended || !a.starts_with('-') || a == "-" {
            positional.push(&args[i - 1]);
            continue;
        }
        if a == "--" {
            ended = true;
        } else if let Some(long) = a.strip_prefix("--") {
            let (key, value) = long
                .split_once('=')
                .map_or((long, None), |(k, v)| (k, Some(v)));
            match key {
                "in-place" => in_place = true,
                "expression" | "file" => {
                    has_script = true;
                    if value.is_none() {
                        i += 1;
                    }
                }
                "line-length" if value.is_none() => i += 1,
                _ => {}
            }
        } else {
            for (j, c) in a.chars().skip(1).enumerate() {
                match c {
                    // -i[SUFFIX]: the rest of the cluster is the suffix.
                    'i' => {
                        in_place = true;
                        break;
                    }
                    'e' | 'f' | 'l' => {
                        has_script |= c != 'l';
                        // The value is the rest of the cluster, or the next word.
                        if a.chars().count() == j + 2 {
                            i += 1;
                        }
                        break;
                    }
                    _ => {}
                }
            }
        }
    }
    if !in_place {
        return Vec::new();
    }
    let mut files = positional.into_iter();
    if !has_script {
        // BSD `sed -i '' SCRIPT FILE`: an empty word first is the backup suffix.
        let first = files.next();
        if first.is_some_and(|w| w.0.is_empty()) {
            files.next();
        }
    }
    exact_paths(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(script: &str) -> Vec<String> {
        writes(script)
    }

    #[test]
    fn redirections() {
        assert_eq!(w("echo hi > a.txt"), ["a.txt"]);
        assert_eq!(w("echo hi >> ./b.txt"), ["./b.txt"]);
        assert_eq!(w("make &> build.log"), ["build.log"]);
        assert_eq!(w("make &>> build.log"), ["build.log"]);
        assert_eq!(w("cmd 2> err.txt"), ["err.txt"]);
        assert_eq!(w("cmd>out.txt 2>&1"), ["out.txt"]);
        assert_eq!(w("cmd > /dev/null 2>&1"), ["/dev/null"]);
        // A descriptor duplication takes no word: `b` is still cp's destination.
        assert_eq!(w("cp a 2>&1 b"), ["b"]);
        assert_eq!(w("sort < in.txt"), Vec::<String>::new());
        assert_eq!(w("echo \"a > b\" 'c > d'"), Vec::<String>::new());
        assert_eq!(w("echo x > \"my file.txt\""), ["my file.txt"]);
    }

    #[test]
    fn tee_sed_and_heredocs() {
        assert_eq!(w("ls | tee -a log1 log2"), ["log1", "log2"]);
        assert_eq!(w("sed -i 's/a/b/' x.py y.py"), ["x.py", "y.py"]);
        assert_eq!(w("sed -i.bak -e 's/a/b/' -e 's/c/d/' z.py"), ["z.py"]);
        assert_eq!(w("sed -i '' 's/a/b/' mac.py"), ["mac.py"]);
        assert_eq!(w("sed --in-place=.orig s/a/b/ long.py"), ["long.py"]);
        assert_eq!(w("sed -n 1,10p x.py"), Vec::<String>::new());
        assert_eq!(
            w("cat > f.py <<'EOF'\nimport os\nos.remove('x') > 1\nEOF\ntouch done"),
            ["f.py", "done"]
        );
        assert_eq!(w("cat <<-EOF > g.txt\n\trm -rf /\n\tEOF\n"), ["g.txt"]);
    }

    #[test]
    fn file_commands() {
        assert_eq!(w("mv src.txt dst.txt"), ["src.txt", "dst.txt"]);
        assert_eq!(w("mv -f a b dir/"), ["a", "b", "dir/"]);
        assert_eq!(w("mv -t out a b"), ["a", "b", "out"]);
        assert_eq!(w("cp -r a b"), ["b"]);
        assert_eq!(w("cp --target-directory=out a b"), ["out"]);
        assert_eq!(w("rm -rf build dist"), ["build", "dist"]);
        assert_eq!(w("rm -- -weird"), ["-weird"]);
        assert_eq!(w("touch -d yesterday a b"), ["a", "b"]);
        assert_eq!(w("mkdir -p src/app -m 755 lib"), ["src/app", "lib"]);
        assert_eq!(w("sudo -u me rm x && env A=1 touch y"), ["x", "y"]);
        assert_eq!(w("/bin/rm z; FOO=bar mkdir q"), ["z", "q"]);
    }

    #[test]
    fn inexact_words_are_skipped() {
        assert_eq!(
            w("rm *.o a?.txt $OUT ${DIR}/x `pwd`/y {a,b}.c keep"),
            ["keep"]
        );
        assert_eq!(w("echo > \"$HOME/x\""), Vec::<String>::new());
        assert_eq!(w("mv a $DEST"), ["a"]);
    }

    #[test]
    fn structure_does_not_confuse_it() {
        // Command substitution with a here-document and quotes inside.
        let s = "git commit -m \"$(cat <<'EOF'\nFix \"it\" <a@b.c>\nEOF\n)\" && rm old.txt";
        assert_eq!(w(s), ["old.txt"]);
        assert_eq!(w("# rm commented\nrm real"), ["real"]);
        assert_eq!(w("if true; then rm a; else touch b; fi"), ["a", "b"]);
        assert_eq!(w("for f in x y; do echo $f; done > list.txt"), ["list.txt"]);
        assert_eq!(w("( cd sub && rm t ) || { touch u; }"), ["t", "u"]);
        assert_eq!(w("echo a \\\n  > cont.txt"), ["cont.txt"]);
        assert_eq!(w("cat <<< 'here string' > hs.txt"), ["hs.txt"]);
    }

    #[test]
    fn argv_commands() {
        let argv =
            |a: &[&str]| command_writes(&a.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(argv(&["touch", "a b.txt"]), ["a b.txt"]);
        assert_eq!(argv(&["cat", "x"]), Vec::<String>::new());
    }
}
