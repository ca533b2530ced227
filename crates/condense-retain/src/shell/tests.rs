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

/// What the byte walk could get wrong that a walk over `char`s could not: a multi-byte
/// character after a backslash, inside either quotes, in a comment, in a here-document's body
/// and next to its delimiter; a non-ASCII space, which is no separator; a line continued.
#[test]
fn tokenizer_multi_byte_characters_escapes_and_here_documents() {
    let words = |w: &[&str]| {
        w.iter()
            .map(|w| Tok::Word((*w).to_string()))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        tokenize("echo \"é\\é\\\"\" 'ü' \\中 a\u{a0}b #ü tail"),
        words(&["echo", "é\\é\"", "ü", "中", "a\u{a0}b"])
    );
    assert_eq!(tokenize("ec\\\nho ok"), words(&["echo", "ok"]));
    let mut heredoc = words(&["cat"]);
    heredoc.extend([Tok::Redir("<<"), Tok::Word("EOF".into()), Tok::Sep]);
    heredoc.extend(words(&["after", "中"]));
    assert_eq!(
        tokenize("cat <<EOF\nbody é \"\n  EOF  \nafter 中"),
        heredoc,
        "the body skipped up to its delimiter, spaces around it"
    );
    assert_eq!(
        tokenize("cmd 2>é"),
        vec![
            Tok::Word("cmd".into()),
            Tok::Redir(">"),
            Tok::Word("é".into())
        ]
    );
}
