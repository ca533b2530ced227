//! Tests of the shell tokenizer: which files each command form reads, writes, moves and
//! deletes, through `cd`, redirections, heredocs, wrappers and nested scripts.

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
    assert_eq!(ops("cat {a,b}.rs `which x`"), vec![]);
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
    assert_eq!(ops("cd /w && rm -rf build/"), vec![p("/w/build/", Delete)]);
}

#[test]
fn redirections_tee_and_sed() {
    assert_eq!(ops("sed -i 's/a/b/' src/c.rs"), vec![p("src/c.rs", Edit)]);
    assert_eq!(ops("sed -i.bak -e 's/a/b/' x.py"), vec![p("x.py", Edit)]);
    assert_eq!(ops("echo hi | tee out.txt"), vec![p("out.txt", Write)]);
    assert_eq!(
        ops("echo hi | tee -a out.txt b.txt"),
        vec![p("out.txt", Append), p("b.txt", Append)]
    );
    assert_eq!(ops("echo 'a > b' > f.txt"), vec![p("f.txt", Write)]);
    assert_eq!(
        ops("echo x >> log.md 2>/dev/null"),
        vec![p("log.md", Append)]
    );
    assert_eq!(ops("cargo test 2> err.txt"), vec![p("err.txt", Write)]);
    assert_eq!(ops("make &> build.log"), vec![p("build.log", Write)]);
    assert_eq!(ops("make &>> build.log"), vec![p("build.log", Append)]);
    assert_eq!(ops("ls >&2"), vec![]);
}

#[test]
fn heredoc_bodies_are_not_commands() {
    let cmd = "cat > notes.md <<'EOF'\ncat secret.txt\n> other.txt\nrm -rf /\nEOF\ncat after.txt";
    assert_eq!(ops(cmd), vec![p("notes.md", Write), p("after.txt", Read)]);
    let cmd = "cat <<-EOF >> log.txt\n\tline\n\tEOF\ntouch done";
    assert_eq!(ops(cmd), vec![p("log.txt", Append), p("done", Touch)]);
    // A here-document feeding a program writes nothing.
    assert_eq!(ops("python3 - <<'PY'\nopen('x','w')\nPY"), vec![]);
}

#[test]
fn moves_copies_and_deletes() {
    assert_eq!(
        ops("mv old.rs new.rs"),
        vec![p("old.rs", MoveFrom), p("new.rs", MoveTo)]
    );
    assert_eq!(
        ops("mv -f a b dir/"),
        vec![p("a", MoveFrom), p("b", MoveFrom), p("dir/", MoveTo)]
    );
    assert_eq!(
        ops("mv -t dest a"),
        vec![p("a", MoveFrom), p("dest", MoveTo)]
    );
    assert_eq!(
        ops("git mv a.rs b.rs"),
        vec![p("a.rs", MoveFrom), p("b.rs", MoveTo)]
    );
    assert_eq!(ops("cp -r src/ backup/"), vec![p("backup/", CopyTo)]);
    assert_eq!(ops("cp only-one"), vec![]);
    assert_eq!(
        ops("rm -rf build dist/x.js -- -weird"),
        // An operand that looks like an option is never taken for a path.
        vec![p("build", Delete), p("dist/x.js", Delete)]
    );
    assert_eq!(ops("git rm -r old/"), vec![p("old/", Delete)]);
    assert_eq!(ops("git rm --cached secret.env"), vec![]);
    assert_eq!(ops("unlink tmp.sock"), vec![p("tmp.sock", Delete)]);
}

#[test]
fn touch_and_mkdir() {
    assert_eq!(
        ops("touch a.txt -d yesterday b.txt"),
        vec![p("a.txt", Touch), p("b.txt", Touch)]
    );
    assert_eq!(
        ops("mkdir -p src/components src/types -m 755"),
        vec![p("src/components", Mkdir), p("src/types", Mkdir)]
    );
    assert_eq!(
        ops("cd /p/Demo && mkdir -p types && ls -la types/"),
        vec![p("/p/Demo/types", Mkdir)]
    );
}

#[test]
fn nested_shell_scripts_and_argv() {
    assert_eq!(
        ops("bash -lc 'echo x > out.txt && rm tmp'"),
        vec![p("out.txt", Write), p("tmp", Delete)]
    );
    assert_eq!(
        argv_file_ops(&["rm", "-f", "a.txt"]),
        vec![p("a.txt", Delete)]
    );
    // No shell: `>` is an argument, not a redirection.
    assert_eq!(argv_file_ops(&["echo", ">", "x"]), vec![]);
}

#[test]
fn wrappers_and_commands() {
    assert_eq!(
        ops("sudo RUST_LOG=1 rm -f /etc/x"),
        vec![p("/etc/x", Delete)]
    );
    assert_eq!(
        commands("cd app && RUST_LOG=1 cargo test -p x 2>&1 | tail -5 # run"),
        vec![
            vec!["cd".to_string(), "app".into()],
            vec!["cargo".into(), "test".into(), "-p".into(), "x".into()],
            vec!["tail".into(), "-5".into()],
        ]
    );
}

#[test]
fn tokenizer_quotes_and_escapes() {
    assert_eq!(
        ops(r#"cat "a b.txt" 'c d.txt' e\ f.txt"#),
        vec![p("a b.txt", Read), p("c d.txt", Read), p("e f.txt", Read)]
    );
    assert_eq!(ops("echo $(cat x) > y"), vec![p("y", Write)]);
    assert_eq!(ops("echo a; echo b > c # > d"), vec![p("c", Write)]);
}

/// The tokenizer as it was, over a vector of `char`s: the reference the byte walk must agree
/// with.
mod by_chars {
    use super::Tok;

    #[allow(clippy::too_many_lines)]
    pub(super) fn tokenize(src: &str) -> Vec<Tok> {
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
}

/// Generated command lines (quotes, escapes, here-documents, comments, substitutions,
/// operators, multi-byte characters next to each of them) split as the `char` walk split them.
#[test]
fn the_byte_walk_splits_as_the_char_walk() {
    let alphabet = [
        " ", "\t", "\n", "\r\n", "\\", "\\\n", "'", "\"", "\\\"", "$(", ")", "(", "`", "#", ";",
        "|", "||", "&", "&&", "&>", "&>>", ">", ">>", "<", "<<", "<<-", "<<<", "2>", "EOF",
        "<<EOF\n", "\nEOF\n", "<<'X'\n", " X \n", "cat", "pytest", "é", "中", "\u{a0}", "\u{2028}",
        "x", "12", "$", "a b",
    ];
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for _ in 0..20_000 {
        let len = (next() % 30) as usize;
        let line: String = (0..len)
            .map(|_| alphabet[(next() % alphabet.len() as u64) as usize])
            .collect();
        assert_eq!(tokenize(&line), by_chars::tokenize(&line), "{line:?}");
    }
}
