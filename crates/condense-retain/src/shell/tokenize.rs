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
