//! The shell tokenizer: words, separators and redirections of a POSIX command line.

/// A token of a command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Tok {
    Word(String),
    /// A command separator: `|`, `||`, `&&`, `;`, `&`, newline, parentheses.
    Sep,
    /// A redirection operator: `>`, `>>`, `<`, `<<`, `<<<`, `>&`, `&>`, `&>>`, `<&`, `<>`.
    Redir(&'static str),
}

/// Splits a command line into words, separators and redirections. Quotes are removed,
/// `$(...)` and backquotes stay inside their word, comments and here-document bodies are dropped.
///
/// Walks the bytes: every character the shell treats specially is ASCII, and a multi-byte
/// character is copied whole into its word, byte by byte, or skipped whole with a comment or a
/// here-document. An agent's commands carry whole files in here-documents: walking them as a
/// vector of `char`s, and each body line copied to compare it with the delimiter, was most of
/// reading them.
pub(super) fn tokenize(src: &str) -> Vec<Tok> {
    let bytes = src.as_bytes();
    let mut toks = Vec::new();
    let mut word: Vec<u8> = Vec::new();
    let mut quoted = false; // the current word had quotes (so `''` is a word)
    let mut heredocs: Vec<String> = Vec::new();
    let mut want_delim = false;
    let mut i = 0;

    // Whole characters only ever go into `word` (see above): it is UTF-8.
    let text = |w: Vec<u8>| {
        String::from_utf8(w).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
    };

    macro_rules! flush {
        () => {
            if !word.is_empty() || quoted {
                let w = text(std::mem::take(&mut word));
                if want_delim {
                    heredocs.push(w.clone());
                    want_delim = false;
                }
                toks.push(Tok::Word(w));
                quoted = false;
            }
        };
    }

    while let Some(&c) = bytes.get(i) {
        let next = bytes.get(i + 1).copied();
        match c {
            b'\\' => {
                match next {
                    Some(b'\n') | None => {}
                    Some(n) => word.push(n),
                }
                i += 2;
                continue;
            }
            b'\'' => {
                quoted = true;
                i += 1;
                while let Some(&q) = bytes.get(i) {
                    i += 1;
                    if q == b'\'' {
                        break;
                    }
                    word.push(q);
                }
                continue;
            }
            b'"' => {
                quoted = true;
                i += 1;
                while let Some(&q) = bytes.get(i) {
                    i += 1;
                    match q {
                        b'"' => break,
                        b'\\' => {
                            if let Some(&e) = bytes.get(i) {
                                if !matches!(e, b'"' | b'\\' | b'$' | b'`') {
                                    word.push(b'\\');
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
            b'$' if next == Some(b'(') => {
                // Command substitution: kept in the word, balanced.
                let mut depth = 0;
                while let Some(&q) = bytes.get(i) {
                    word.push(q);
                    i += 1;
                    match q {
                        b'(' => depth += 1,
                        b')' => {
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
            b'`' => {
                word.push(c);
                i += 1;
                while let Some(&q) = bytes.get(i) {
                    word.push(q);
                    i += 1;
                    if q == b'`' {
                        break;
                    }
                }
                continue;
            }
            b'#' if word.is_empty() && !quoted => {
                i += memchr::memchr(b'\n', &bytes[i..]).unwrap_or(bytes.len() - i);
                continue;
            }
            b' ' | b'\t' | b'\r' => flush!(),
            b'\n' => {
                flush!();
                toks.push(Tok::Sep);
                i += 1;
                // Skip the bodies of the here-documents opened on this line.
                for delim in std::mem::take(&mut heredocs) {
                    while i < bytes.len() {
                        let end = memchr::memchr(b'\n', &bytes[i..]).map_or(bytes.len(), |p| i + p);
                        // Both ends follow a `\n` or end the text: character boundaries.
                        let line = src.get(i..end).unwrap_or_default();
                        i = end + 1;
                        if line.trim() == delim {
                            break;
                        }
                    }
                }
                continue;
            }
            b';' | b'(' | b')' => {
                flush!();
                toks.push(Tok::Sep);
            }
            b'|' => {
                flush!();
                toks.push(Tok::Sep);
                if matches!(next, Some(b'|') | Some(b'&')) {
                    i += 1;
                }
            }
            b'&' => {
                flush!();
                if next == Some(b'>') {
                    let append = bytes.get(i + 2) == Some(&b'>');
                    toks.push(Tok::Redir(if append { "&>>" } else { "&>" }));
                    i += if append { 3 } else { 2 };
                    continue;
                }
                toks.push(Tok::Sep);
                if next == Some(b'&') {
                    i += 1;
                }
            }
            b'>' | b'<' => {
                // A word of digits right before is a file descriptor (`2>`), not an argument.
                if !quoted && !word.is_empty() && word.iter().all(u8::is_ascii_digit) {
                    word.clear();
                }
                flush!();
                let (op, len) = match (c, next, bytes.get(i + 2).copied()) {
                    (b'>', Some(b'>'), _) => (">>", 2),
                    (b'>', Some(b'&'), _) => (">&", 2),
                    (b'>', Some(b'|'), _) => (">", 2),
                    (b'>', _, _) => (">", 1),
                    (b'<', Some(b'<'), Some(b'<')) => ("<<<", 3),
                    (b'<', Some(b'<'), Some(b'-')) => ("<<", 3),
                    (b'<', Some(b'<'), _) => ("<<", 2),
                    (b'<', Some(b'&'), _) => ("<&", 2),
                    (b'<', Some(b'>'), _) => ("<>", 2),
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
        toks.push(Tok::Word(text(word)));
    }
    toks
}
